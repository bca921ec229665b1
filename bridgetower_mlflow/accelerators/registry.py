"""The accelerator names and their adapters. Device models (A100, H100, Gaudi2...) are checked at detection."""

from __future__ import annotations

from ..errors import ConfigError
from .base import Accelerator

CPU_NAMES = ("cpu",)
NVIDIA_NAMES = ("cuda", "a100", "h100", "h200")
GAUDI_NAMES = ("gaudi", "gaudi2", "gaudi3")
ACCELERATOR_KINDS = CPU_NAMES + NVIDIA_NAMES + GAUDI_NAMES


def family(name: str) -> str:
    """cpu, cuda or gaudi for any accelerator name; ConfigError for an unknown one."""
    key = str(name).strip().lower()
    for family_name, names in (("cpu", CPU_NAMES), ("cuda", NVIDIA_NAMES), ("gaudi", GAUDI_NAMES)):
        if key in names:
            return family_name
    raise ConfigError("accel", name, "allowed: " + ", ".join(ACCELERATOR_KINDS))


def get_accelerator(requested: str) -> Accelerator:
    """The adapter for a user's `accel` value; raises ConfigError for unknown names."""
    kind = family(requested)
    name = str(requested).strip().lower()
    if kind == "cpu":
        from .cpu import CpuAccelerator

        return CpuAccelerator(name)
    if kind == "cuda":
        from .cuda.adapter import CudaAccelerator

        return CudaAccelerator(name)
    from .gaudi.adapter import GaudiAccelerator

    return GaudiAccelerator(name)
