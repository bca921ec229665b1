"""The adapter for each accelerator name (the names and families are plain data in contract.py)."""

from __future__ import annotations

from ..contract import ACCELERATOR_KINDS, CPU_FAMILY, CUDA_FAMILY, accelerator_family
from ..errors import ConfigError
from .base import Accelerator


def family(name: str) -> str:
    """cpu, cuda or gaudi for any accelerator name; ConfigError for an unknown one."""
    found = accelerator_family(name)
    if found is None:
        raise ConfigError("accel", name, "allowed: " + ", ".join(ACCELERATOR_KINDS))
    return found


def get_accelerator(requested: str) -> Accelerator:
    """The adapter for a user's `accel` value; raises ConfigError for unknown names."""
    kind = family(requested)
    name = str(requested).strip().lower()
    if kind == CPU_FAMILY:
        from .cpu import CpuAccelerator

        return CpuAccelerator(name)
    if kind == CUDA_FAMILY:
        from .cuda.adapter import CudaAccelerator

        return CudaAccelerator(name)
    from .gaudi.adapter import GaudiAccelerator

    return GaudiAccelerator(name)
