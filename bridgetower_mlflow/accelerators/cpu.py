"""CPU: plain transformers Trainer, gloo for multi-process runs."""

from __future__ import annotations

from ..errors import ConfigError
from ..host import cpu_model_name
from .base import Accelerator, DeviceInfo, DeviceSampler, PhaseTiming, RecipeSettings, TrainingRecipe
from .hf_args import merged_kwargs


class CpuAccelerator(Accelerator):
    def detect(self, devices_here: int, world_size: int, launcher: bool = False) -> DeviceInfo:
        import psutil
        import torch

        return DeviceInfo(
            kind="cpu", device_name=cpu_model_name(), count=world_size,
            memory_gb=round(psutil.virtual_memory().total / 2**30, 1), driver=None,
            software={"torch": torch.__version__, "torch_threads": str(torch.get_num_threads())},
        )

    def recipe(self, device: DeviceInfo, settings: RecipeSettings) -> TrainingRecipe:
        from transformers import Trainer, TrainingArguments

        if settings.distribution_strategy != "ddp":
            raise ConfigError("distribution_strategy", settings.distribution_strategy,
                              "allowed on cpu: ddp (fast_ddp is optimum-habana's Gaudi strategy)")
        kwargs = merged_kwargs(TrainingArguments, settings)
        kwargs["use_cpu"] = True
        if settings.precision == "bf16":
            kwargs["bf16"] = True
        backend = "gloo" if settings.world_size > 1 else None
        if backend:
            kwargs["ddp_backend"] = backend
        precision = "bf16" if kwargs.get("bf16") else "fp32"
        return TrainingRecipe(TrainingArguments, kwargs, Trainer, precision=precision, ddp_backend=backend)

    def device_samplers(self, device: DeviceInfo) -> list[DeviceSampler]:
        """The CPU packages' power and energy (RAPL), where the host exposes powercap zones."""
        from .rapl import RaplSampler

        try:
            return [RaplSampler()]
        except (OSError, ValueError):  # no zone, or one this user may not read (root-only on many hosts)
            return []

    def phase_timing(self, recipe: TrainingRecipe, args: object) -> PhaseTiming:
        """The host clock: on a CPU every phase runs on the host, in order, so its instants are the device's."""
        return PhaseTiming(notes=("host_to_device on the CPU is no copy: the input preparation (the uint8 "
                                  "normalize)",))
