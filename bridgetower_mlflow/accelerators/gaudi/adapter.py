"""Intel Gaudi2/Gaudi3: optimum-habana's GaudiTrainer (the study's path) or plain Trainer on hpu.

Import order matters on Gaudi: optimum.habana and habana_frameworks.torch load only inside methods,
and detection reads HLML/hl-smi first so the Gaudi config is declared before the HPU stack loads.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from ...contract import EXECUTION_MODE_TAG, MEDIAPIPE_LOADER
from ...environment import HPU_LAZY_MODE_ENV, hpu_lazy_mode
from ...errors import ConfigError, DeviceDecodeUnavailable
from ..base import (
    FORWARD_END,
    GRADS_READY,
    INPUT_END,
    Accelerator,
    DecodeRequest,
    DeviceInfo,
    EventClock,
    PhaseTiming,
    RecipeSettings,
    TrainingRecipe,
)
from ..hf_args import hf_args_overrides, merged_kwargs, shared_kwargs
from ..installed import package_version
from ..request_checks import check_count, check_label
from .arguments import (
    DEFAULT_GAUDI_CONFIG_NAME,
    HABANA_CLIP_CONFIG,
    NATIVE_PATH,
    OPTIMUM_PATH,
    gaudi_config_overrides,
    gaudi_training_kwargs,
    mpirun_command,
    native_training_kwargs,
    physical_core_layout,
)
from .detect import installed_gaudi_path
from .execution import LAZY, compile_kwargs, loaded_mode, mark_step_callback, wanted_mode

logger = logging.getLogger(__name__)


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


def resolve_gaudi_config_name(name: str, output_dir: str) -> str:
    """`name` if it loads; offline, the default Habana/clip comes from the embedded copy."""
    from optimum.habana import GaudiConfig

    try:
        GaudiConfig.from_pretrained(name)
        return name
    except Exception as exc:  # noqa: BLE001 - Hub/network/file errors all land here
        if name != DEFAULT_GAUDI_CONFIG_NAME:
            raise ConfigError("gaudi_config_name", name,
                              f"allowed: a Hub id or a folder with gaudi_config.json ({exc})") from None
        folder = Path(output_dir) / "gaudi_config"
        folder.mkdir(parents=True, exist_ok=True)
        GaudiConfig(**HABANA_CLIP_CONFIG).save_pretrained(str(folder))
        logger.warning("Gaudi config %s unreachable (%s); using the embedded copy in %s", name, exc, folder)
        return str(folder)


class GaudiAccelerator(Accelerator):
    device_decode_loader_name = MEDIAPIPE_LOADER

    @property
    def distribution_strategies(self) -> tuple[str, ...]:  # type: ignore[override]
        """fast_ddp is optimum-habana's: the native HPU path (plain Trainer) refuses it."""
        return ("ddp", "fast_ddp") if installed_gaudi_path() == OPTIMUM_PATH else ("ddp",)

    def stack_environment(self, hf_args: tuple = ()) -> dict[str, str]:
        optimum = installed_gaudi_path() == OPTIMUM_PATH
        return {HPU_LAZY_MODE_ENV: "1" if wanted_mode(optimum, hf_args) == LAZY else "0"}

    def detect(self, devices_here: int, world_size: int, launcher: bool = False) -> DeviceInfo:
        from .detect import gaudi_label, probe_gaudi

        probe = probe_gaudi(self.requested, in_process=not launcher)
        kind = check_label(self.requested, gaudi_label(probe.name), probe.name, "gaudi")
        check_count(self.requested, devices_here, probe.count, "Gaudi device(s)")
        path = installed_gaudi_path()
        software = {"torch": package_version("torch"), "synapseai": package_version("habana-torch-plugin"),
                    "optimum_habana": package_version("optimum-habana"),
                    "habana_media_loader": package_version("habana-media-loader")}
        return DeviceInfo(
            kind=kind, device_name=probe.name, count=world_size, memory_gb=probe.memory_gb,
            driver=probe.driver, software={k: v for k, v in software.items() if v}, training_path=path,
            extra_tags={"gaudi.path": path, "gaudi.detected_by": probe.source},
        )

    def recipe(self, device: DeviceInfo, settings: RecipeSettings) -> TrainingRecipe:
        mode = loaded_mode()
        if device.training_path == NATIVE_PATH:
            return self._native_recipe(settings, mode)
        from optimum.habana import GaudiConfig, GaudiTrainer, GaudiTrainingArguments

        shared, user = shared_kwargs(GaudiTrainingArguments, settings), hf_args_overrides(GaudiTrainingArguments,
                                                                                         settings.hf_args)
        kwargs = {**shared, **user}
        if mode != LAZY:  # the bridge loaded eagerly (PT_HPU_LAZY_MODE=0 before Python started)
            eager = compile_kwargs(optimum_path=True)
            if user.get("torch_compile") is False:  # a backend alone would switch compile back on
                eager = {k: v for k, v in eager.items() if not k.startswith("torch_compile")}
            kwargs = {**shared, **eager, **user}
        name = resolve_gaudi_config_name(kwargs.get("gaudi_config_name") or DEFAULT_GAUDI_CONFIG_NAME,
                                         kwargs.get("output_dir", "."))
        kwargs = gaudi_training_kwargs(kwargs, settings, gaudi_config_name=name,
                                       strategies=supported_strategies(GaudiTrainingArguments))
        gaudi_config = GaudiConfig.from_pretrained(name)
        for key, value in gaudi_config_overrides(settings.precision).items():
            setattr(gaudi_config, key, value)
        # GaudiTrainer resets args.bf16 once it owns autocast: the Gaudi config says what really ran
        precision = "bf16" if kwargs["bf16"] or gaudi_config.use_torch_autocast else "fp32"
        return TrainingRecipe(GaudiTrainingArguments, kwargs, GaudiTrainer, {"gaudi_config": gaudi_config},
                              {"gaudi_config": gaudi_config.to_dict()}, precision, kwargs.get("ddp_backend"),
                              tags={EXECUTION_MODE_TAG: mode})

    @staticmethod
    def _native_recipe(settings: RecipeSettings, mode: str) -> TrainingRecipe:
        """Plain Trainer on hpu: eager + torch.compile, or lazy with mark_step (transformers never calls it)."""
        from transformers import Trainer, TrainingArguments

        kwargs = native_training_kwargs(merged_kwargs(TrainingArguments, settings), settings)
        callbacks = (mark_step_callback(),) if mode == LAZY else ()
        if mode != LAZY:
            kwargs = {**compile_kwargs(optimum_path=False), **kwargs}
        return TrainingRecipe(TrainingArguments, kwargs, Trainer, precision="bf16" if kwargs["bf16"] else "fp32",
                              ddp_backend=kwargs.get("ddp_backend"), callbacks=callbacks,
                              tags={EXECUTION_MODE_TAG: mode})

    def launch_command(self, device: DeviceInfo, module_argv: list[str]) -> list[str]:
        cores, per_socket = physical_core_layout()
        mode = hpu_lazy_mode()
        env = {HPU_LAZY_MODE_ENV: mode} if mode is not None else {}  # every rank loads the same mode
        return mpirun_command(device.count, module_argv, physical_cores=cores, cores_per_socket=per_socket, env=env)

    def peak_memory_gb(self) -> float | None:
        import habana_frameworks.torch.hpu as hthpu

        return round(hthpu.max_memory_allocated() / 2**30, 3)

    def device_decode_loader(self, request: DecodeRequest):
        """Habana media pipeline; num_workers does not apply (the pipe reads files itself)."""
        if request.device.kind == "gaudi":
            raise DeviceDecodeUnavailable("the Habana media pipeline does not support first-generation Gaudi")
        from .media_pipe import build_media_pipe_loader

        return build_media_pipe_loader(request)

    def device_samplers(self, device: DeviceInfo) -> list:
        from ...samplers.hl_smi import HlSmiSampler
        from ...samplers.hlml import HlmlSampler

        reasons = []
        for sampler_class in (HlmlSampler, HlSmiSampler):
            try:
                return [sampler_class(device.count)]
            except Exception as exc:  # noqa: BLE001 - telemetry fails soft
                reasons.append(f"{sampler_class.__name__}: {type(exc).__name__}: {exc}")
        logger.warning("HPU telemetry off: %s", "; ".join(reasons))
        return []

    def phase_timing(self, recipe: TrainingRecipe, args) -> PhaseTiming:
        """HPU events where the run trains on the HPU; in lazy mode only where a step is marked anyway.

        The bridge's HPUEvent::record marks a step in lazy mode (it launches the graph built so far): an event
        between input, forward and backward would cut the step's graph, so they merge into forward_backward.
        """
        import functools

        if getattr(getattr(args, "device", None), "type", "cpu") != "hpu":  # GaudiTrainer's CPU mode
            return PhaseTiming(notes=("the run trains on the CPU (use_habana false): no copy in host_to_device",))
        import habana_frameworks.torch.hpu as hthpu

        lazy = recipe.tags.get(EXECUTION_MODE_TAG) == LAZY and getattr(args, "use_lazy_mode", True)
        source = "device events (habana_frameworks.torch.hpu.Event)"
        clock = functools.partial(EventClock, functools.partial(hthpu.Event, enable_timing=True),
                                  _lazy_synchronize if lazy else hthpu.synchronize, source)
        if getattr(args, "distribution_strategy", "ddp") == "fast_ddp":
            all_reduce = ("fast_ddp's all_reduce_gradients runs between backward and the optimizer step, where "
                          "no point is marked: inside optimizer")
        elif lazy:
            all_reduce = "DDP's all-reduce runs inside the backward graph (lazy mode): inside forward_backward"
        else:
            all_reduce = "not timed on HCCL (a DDP comm hook there is unverified): inside backward"
        if not lazy:
            return PhaseTiming(clock, source, all_reduce=all_reduce)
        return PhaseTiming(clock, source, frozenset({INPUT_END, FORWARD_END, GRADS_READY}),
                           merged_why="lazy mode runs them as one graph at mark_step, and an HPU event recorded "
                                      "between them would cut that graph", all_reduce=all_reduce)

    def profiler_activities(self) -> list:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU, ProfilerActivity.HPU]


def _lazy_synchronize() -> None:
    """Lazy mode: launch what was built (mark_step), then wait for the device."""
    import habana_frameworks.torch.core as htcore
    import habana_frameworks.torch.hpu as hthpu

    htcore.mark_step()
    hthpu.synchronize()
