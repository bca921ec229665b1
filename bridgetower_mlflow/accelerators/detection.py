"""Shared detection helpers: package versions, label and count checks, "allowed here"."""

from __future__ import annotations

import importlib.metadata
import importlib.util

from ..errors import AcceleratorUnavailable


def package_version(name: str) -> str | None:
    """Installed distribution version without importing it (None when absent)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def module_present(name: str) -> bool:
    """True when `name` could be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def allowed_here() -> str:
    """What `accel` values could work on this machine, for error messages (cheap checks only)."""
    allowed = ["cpu"]
    try:
        import torch

        if torch.cuda.is_available():
            allowed.append("cuda")
    except ImportError:
        pass
    if module_present("habana_frameworks"):
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
