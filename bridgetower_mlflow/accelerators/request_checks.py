"""The checks of what a run asks against what is here: the accelerator label, the device count, and what
`accel` values could work on this machine (for the messages)."""

from __future__ import annotations

from ..errors import AcceleratorUnavailable
from .installed import HABANA_TORCH, module_present


def allowed_here() -> str:
    """What `accel` values could work on this machine, for error messages (cheap checks only)."""
    allowed = ["cpu"]
    try:
        import torch

        if torch.cuda.is_available():
            allowed.append("cuda")
    except ImportError:
        pass
    if module_present(HABANA_TORCH):
        allowed.append("gaudi")
    return ", ".join(allowed)


def check_label(requested: str, detected: str, device_name: str, family: str) -> str:
    """The canonical kind: `family` (cuda, gaudi) takes the detected label; a model name must match."""
    if requested in (family, detected):
        return detected
    raise AcceleratorUnavailable(
        f"accel: {requested} requested but the detected device is {device_name!r} ({detected}); "
        f"allowed here: {detected} or {family}"
    )


def check_count(requested: str, needed: int, found: int, what: str) -> None:
    if found < needed:
        raise AcceleratorUnavailable(
            f"devices: invalid value {needed} for accel={requested}; {found} {what} visible here, "
            f"allowed: 1..{max(found, 1)}"
        )
