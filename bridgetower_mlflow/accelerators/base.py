"""The accelerator interface: everything that differs between CPU, NVIDIA and Gaudi.

Vendor modules (habana_frameworks, optimum.habana, pynvml, hlml) are imported only inside methods.
"""

from __future__ import annotations

import os
import platform
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable


@dataclass(frozen=True)
class DeviceInfo:
    """What detection found; becomes the `accelerator.*` run tags."""

    kind: str  # canonical tag value: cpu, a100, h100, h200, cuda, gaudi2, gaudi3
    device_name: str
    count: int
    memory_gb: float | None = None
    driver: str | None = None
    software: dict = field(default_factory=dict)  # software.<pkg> tags (cuda, synapseai, ...)
    extra_tags: dict = field(default_factory=dict)  # e.g. gaudi.path = optimum-habana | native


@dataclass
class DeviceLoader:
    """A train loader that decodes on the device; yields batches already on the device."""

    name: str  # data_loader tag: nvjpeg, habana-mediapipe
    loader: Iterable
    length: int


class DeviceSampler(ABC):
    """Polls device telemetry; returns {metric_name: value} with `system/` names."""

    @abstractmethod
    def sample(self) -> dict[str, float]:
        ...

    def close(self) -> None:
        pass


class Accelerator(ABC):
    """One adapter per kind; `requested` is the user's accel value (h100, gaudi2, cuda...)."""

    kind: str = "base"
    device_loader_name: str | None = None  # what device decode is called on this kind

    def __init__(self, requested: str):
        self.requested = requested

    # detection -----------------------------------------------------------------------------
    @abstractmethod
    def detect(self, devices: int) -> DeviceInfo:
        """Check the hardware is present (and matches `requested`); raise AcceleratorUnavailable."""

    # training ------------------------------------------------------------------------------
    def training_arguments_class(self) -> type:
        """The TrainingArguments class (hf_args are validated against its fields)."""
        from transformers import TrainingArguments

        return TrainingArguments

    @abstractmethod
    def training_arguments(self, common: dict, config) -> Any:
        """Build the TrainingArguments object (or its vendor subclass) from common kwargs."""

    def trainer_class(self) -> type:
        """The Trainer base class this kind trains with."""
        from transformers import Trainer

        return Trainer

    def trainer_kwargs(self, config) -> dict:
        """Extra keyword arguments for the trainer (GaudiTrainer needs gaudi_config)."""
        return {}

    def extra_params(self, args, config) -> dict:
        """Vendor settings that shaped the run (e.g. the Gaudi config), logged as params."""
        return {}

    def distributed_backend(self) -> str:
        return "gloo"

    def launch_command(self, devices: int, module_argv: list[str]) -> list[str]:
        """Command that starts `devices` processes of `python -m bridgetower_mlflow ...`."""
        import sys

        return [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={devices}", "-m", "bridgetower_mlflow", *module_argv,
        ]

    def precision_used(self, args) -> str:
        """What the run really computed in (the `precision` tag): bf16 or fp32."""
        return "bf16" if getattr(args, "bf16", False) else "fp32"

    def synchronize(self) -> None:
        """Wait for queued device work (used only at phase boundaries, never per step)."""

    def peak_memory_gb(self) -> float | None:
        return None

    # data ----------------------------------------------------------------------------------
    def supports_device_decode(self) -> bool:
        return False

    def device_decode_loader(self, dataset, *, batch_size: int, seed: int, image_size: int,
                             mean, std, num_workers: int, collate: Callable, rank: int,
                             world_size: int) -> DeviceLoader:
        """Build the on-device decode loader; raise DeviceDecodeUnavailable with the reason."""
        raise DeviceDecodeUnavailable(
            f"not supported on {self.requested}; allowed on gaudi2, gaudi3 (Habana media pipeline) "
            "and NVIDIA GPUs (nvJPEG)"
        )

    # telemetry -----------------------------------------------------------------------------
    def device_samplers(self, device_count: int) -> list[DeviceSampler]:
        return []

    def enables_mlflow_gpu_metrics(self) -> bool:
        """True when MLflow's own system-metrics monitor covers the devices (NVIDIA)."""
        return False


class DeviceDecodeUnavailable(Exception):
    """Raised by an adapter when its on-device loader cannot start (reason in the message)."""


def host_facts() -> dict:
    """host.cpu_model and host.cpu_count tags, without importing anything heavy."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"host.cpu_model": model, "host.cpu_count": str(os.cpu_count() or 0)}
