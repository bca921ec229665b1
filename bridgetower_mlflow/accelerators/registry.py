"""accel name -> adapter. Device names (A100, H100, Gaudi2...) are labels checked at detection."""

from __future__ import annotations

from ..config import ACCELERATOR_KINDS
from ..errors import ConfigError
from .base import Accelerator

NVIDIA_NAMES = ("cuda", "a100", "h100", "h200")
GAUDI_NAMES = ("gaudi", "gaudi2", "gaudi3")


def get_accelerator(requested: str) -> Accelerator:
    """The adapter for a user's `accel` value; raises ConfigError for unknown names."""
    name = str(requested).strip().lower()
    if name == "cpu":
        from .cpu import CpuAccelerator

        return CpuAccelerator(name)
    if name in NVIDIA_NAMES:
        from .cuda import CudaAccelerator

        return CudaAccelerator(name)
    if name in GAUDI_NAMES:
        from .gaudi import GaudiAccelerator

        return GaudiAccelerator(name)
    raise ConfigError("accel", requested, "allowed: " + ", ".join(ACCELERATOR_KINDS))
