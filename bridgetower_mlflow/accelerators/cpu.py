"""CPU: plain transformers Trainer, gloo for multi-process runs; the host's cores shared out between its ranks."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..environment import THREADS_ENV, TORCHELASTIC_ENV, parent_environment, threads_variables
from ..errors import ConfigError
from ..host import cpu_model_name
from .base import Accelerator, DeviceInfo, PhaseTiming, RecipeSettings, TrainingRecipe
from .hf_args import merged_kwargs

if TYPE_CHECKING:
    from ..samplers.protocol import Sampler


def rank_threads(local_ranks: int, cores: int | None = None, env: Mapping[str, str] | None = None,
                 parent_env: Callable[[], Mapping[str, str] | None] = parent_environment) -> int | None:
    """Torch threads for each of `local_ranks` CPU ranks on this host: its cores shared out, unless the user set
    OMP_NUM_THREADS (None: keep what torch has). torchrun sets OMP_NUM_THREADS=1 in its ranks when it is unset;
    a torchrun rank tells that from the user's by the environment torchrun itself was started with."""
    env = threads_variables() if env is None else env
    if local_ranks <= 1:
        return None
    if THREADS_ENV in env:
        parent = parent_env() if TORCHELASTIC_ENV in env else None
        if parent is None or THREADS_ENV in parent:
            return None
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    return max(1, cores // local_ranks)


class CpuAccelerator(Accelerator):
    def detect(self, devices_here: int, world_size: int, launcher: bool = False) -> DeviceInfo:
        """Also gives a rank its share of the cores (a launcher reports the share its ranks will take)."""
        import psutil
        import torch

        threads = rank_threads(devices_here)
        if threads and not launcher:
            torch.set_num_threads(threads)
        return DeviceInfo(
            kind="cpu", device_name=cpu_model_name(), count=world_size,
            memory_gb=round(psutil.virtual_memory().total / 2**30, 1), driver=None,
            software={"torch": torch.__version__,
                      "torch_threads": str(threads if threads and launcher else torch.get_num_threads())},
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

    def device_samplers(self, device: DeviceInfo) -> list[Sampler]:
        """The CPU packages' power and energy (RAPL), where the host exposes powercap zones."""
        from ..samplers.rapl import RaplSampler

        try:
            return [RaplSampler()]
        except (OSError, ValueError):  # no zone, or one this user may not read (root-only on many hosts)
            return []

    def phase_timing(self, recipe: TrainingRecipe, args: object) -> PhaseTiming:
        """The host clock: on a CPU every phase runs on the host, in order, so its instants are the device's."""
        return PhaseTiming(notes=("host_to_device on the CPU is no copy: the input preparation (the uint8 "
                                  "normalize)",))
