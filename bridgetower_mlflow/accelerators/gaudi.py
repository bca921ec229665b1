"""Intel Gaudi2/Gaudi3: optimum-habana's GaudiTrainer (the study's path) or plain Trainer on hpu.

Import order matters on Gaudi: optimum.habana and habana_frameworks.torch load only inside methods,
and detection reads HLML/hl-smi first so the Gaudi config is declared before the HPU stack loads.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from ..errors import ConfigError
from .base import Accelerator, DeviceDecodeUnavailable, DeviceInfo
from .detection import check_count, check_label, local_processes, package_version, world_size
from .gaudi_args import (DEFAULT_GAUDI_CONFIG_NAME, HABANA_CLIP_CONFIG, NATIVE_PATH, OPTIMUM_PATH, PATH_ENV,
                         choose_gaudi_path, gaudi_config_overrides, gaudi_training_kwargs, mpirun_command,
                         native_training_kwargs, physical_core_layout)

logger = logging.getLogger(__name__)


def installed_gaudi_path() -> str:
    """Which training path this Python environment supports (raises on a broken combination)."""
    import importlib.metadata

    from packaging.requirements import Requirement

    requirement = None
    optimum_version = package_version("optimum-habana")
    for line in (importlib.metadata.requires("optimum-habana") or []) if optimum_version else []:
        parsed = Requirement(line)
        if parsed.name == "transformers" and (parsed.marker is None or parsed.marker.evaluate()):
            requirement = str(parsed.specifier) or None
    return choose_gaudi_path(optimum_version, requirement, package_version("transformers") or "0",
                             os.environ.get(PATH_ENV, "").strip() or None)


def supported_strategies(args_class) -> set[str] | None:
    """distribution_strategy values the installed GaudiTrainingArguments accepts (None: no field)."""
    field = next((f for f in dataclasses.fields(args_class) if f.name == "distribution_strategy"), None)
    if field is None:
        return None
    choices = field.metadata.get("choices")
    if not choices:
        import sys

        choices = getattr(sys.modules[args_class.__module__], "SUPPORTED_DISTRIBUTION_STRATEGIES", ["ddp"])
    return set(choices)


class GaudiAccelerator(Accelerator):
    kind = "gaudi"
    device_loader_name = "habana-mediapipe"

    def __init__(self, requested: str):
        super().__init__(requested)
        self._path: str | None = None
        self._label: str | None = None
        self._gaudi_config_name: str | None = None

    @property
    def path(self) -> str:
        if self._path is None:
            self._path = installed_gaudi_path()
        return self._path

    def detect(self, devices: int) -> DeviceInfo:
        from .gaudi_detect import gaudi_label, probe_gaudi

        probe = probe_gaudi(self.requested)
        self._label = check_label(self.requested, gaudi_label(probe.name), probe.name, "gaudi")
        check_count(self.requested, local_processes(devices), probe.count, "Gaudi device(s)")
        software = {"torch": package_version("torch"), "synapseai": package_version("habana-torch-plugin"),
                    "optimum_habana": package_version("optimum-habana"),
                    "habana_media_loader": package_version("habana-media-loader")}
        return DeviceInfo(
            kind=self._label, device_name=probe.name, count=world_size(devices), memory_gb=probe.memory_gb,
            driver=probe.driver, software={k: v for k, v in software.items() if v},
            extra_tags={"gaudi.path": self.path, "gaudi.detected_by": probe.source,
                        "gaudi.lazy_mode": os.environ.get("PT_HPU_LAZY_MODE", "unset")},
        )

    # training ------------------------------------------------------------------------------
    def training_arguments_class(self) -> type:
        if self.path == OPTIMUM_PATH:
            from optimum.habana import GaudiTrainingArguments

            return GaudiTrainingArguments
        return super().training_arguments_class()

    def training_arguments(self, common: dict, config):
        distributed = world_size(config.devices) > 1
        self._fp32 = config.precision == "fp32"
        if self.path == NATIVE_PATH:
            from transformers import TrainingArguments

            return TrainingArguments(**native_training_kwargs(common, config, distributed=distributed))
        # lazy mode is chosen by this variable, read when the HPU stack loads
        os.environ.setdefault("PT_HPU_LAZY_MODE", "1" if common.get("use_lazy_mode", True) else "0")
        args_class = self.training_arguments_class()
        name = self.resolve_gaudi_config_name(common.get("gaudi_config_name") or DEFAULT_GAUDI_CONFIG_NAME,
                                              common.get("output_dir", "."))
        kwargs = gaudi_training_kwargs(common, config, gaudi_config_name=name,
                                       strategies=supported_strategies(args_class), distributed=distributed)
        return args_class(**kwargs)

    def resolve_gaudi_config_name(self, name: str, output_dir: str) -> str:
        """`name` if it loads; offline, the default Habana/clip comes from the embedded copy."""
        from optimum.habana import GaudiConfig

        try:
            GaudiConfig.from_pretrained(name)
            self._gaudi_config_name = name
        except Exception as exc:  # noqa: BLE001 - Hub/network/file errors all land here
            if name != DEFAULT_GAUDI_CONFIG_NAME:
                raise ConfigError("gaudi_config_name", name,
                                  f"allowed: a Hub id or a folder with gaudi_config.json ({exc})") from None
            folder = Path(output_dir) / "gaudi_config"
            folder.mkdir(parents=True, exist_ok=True)
            GaudiConfig(**HABANA_CLIP_CONFIG).save_pretrained(str(folder))
            logger.warning("Gaudi config %s unreachable (%s); using the embedded copy in %s", name, exc, folder)
            self._gaudi_config_name = str(folder)
        return self._gaudi_config_name

    def precision_used(self, args) -> str:
        """GaudiTrainer resets args.bf16 once it owns autocast, so read the Gaudi config's intent too."""
        if self.path == OPTIMUM_PATH and getattr(args, "use_habana", False):
            autocast = self._gaudi_config_name is not None and not getattr(self, "_fp32", False)
            return "bf16" if getattr(args, "bf16", False) or autocast else "fp32"
        return super().precision_used(args)

    def trainer_class(self) -> type:
        if self.path == OPTIMUM_PATH:
            from optimum.habana import GaudiTrainer

            return GaudiTrainer
        return super().trainer_class()

    def trainer_kwargs(self, config) -> dict:
        if self.path != OPTIMUM_PATH:
            return {}
        from optimum.habana import GaudiConfig

        gaudi_config = GaudiConfig.from_pretrained(self._gaudi_config_name or DEFAULT_GAUDI_CONFIG_NAME)
        for key, value in gaudi_config_overrides(config).items():
            setattr(gaudi_config, key, value)
        return {"gaudi_config": gaudi_config}

    def distributed_backend(self) -> str:
        return "hccl"

    def launch_command(self, devices: int, module_argv: list[str]) -> list[str]:
        cores, per_socket = physical_core_layout()
        env = {"PT_HPU_LAZY_MODE": os.environ.get("PT_HPU_LAZY_MODE", "1")} if self.path == OPTIMUM_PATH else {}
        return mpirun_command(devices, module_argv, physical_cores=cores, cores_per_socket=per_socket, env=env)

    def synchronize(self) -> None:
        import habana_frameworks.torch.hpu as hthpu

        hthpu.synchronize()

    def peak_memory_gb(self) -> float | None:
        import habana_frameworks.torch.hpu as hthpu

        return round(hthpu.max_memory_allocated() / 2**30, 3)

    # data ----------------------------------------------------------------------------------
    def supports_device_decode(self) -> bool:
        return self._label != "gaudi"  # the media pipeline does not run on first-generation Gaudi

    def device_decode_loader(self, dataset, *, batch_size, seed, image_size, mean, std, num_workers,
                             collate, rank, world_size):
        """Habana media pipeline; num_workers and collate do not apply (the pipe reads files itself)."""
        if self._label == "gaudi":
            raise DeviceDecodeUnavailable("the Habana media pipeline does not support first-generation Gaudi")
        from .habana_media_pipe import build_media_pipe_loader

        return build_media_pipe_loader(dataset, batch_size=batch_size, seed=seed, image_size=image_size,
                                       mean=mean, std=std, rank=rank, world_size=world_size)

    # telemetry -----------------------------------------------------------------------------
    def device_samplers(self, device_count: int) -> list:
        from .hlml_sampler import HlmlSampler, HlSmiSampler

        reasons = []
        for sampler_class in (HlmlSampler, HlSmiSampler):
            try:
                return [sampler_class(device_count)]
            except Exception as exc:  # noqa: BLE001 - telemetry fails soft
                reasons.append(f"{sampler_class.__name__}: {type(exc).__name__}: {exc}")
        logger.warning("HPU telemetry off: %s", "; ".join(reasons))
        return []
