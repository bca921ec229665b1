"""Shared detection helpers: package versions, label and count checks, "allowed here"."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import sys

from ..errors import AcceleratorUnavailable

log = logging.getLogger(__name__)
HABANA_TORCH = "habana_frameworks.torch"  # Habana's PyTorch bridge (mediapipe shares the namespace)
BROKEN_MODULES: dict[str, str] = {}  # installed but failing at import: name -> why


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


def hide_if_broken(name: str) -> str | None:
    """Import `name` if installed; when it raises anything (a torchvision built for another CUDA major
    raises RuntimeError), hide it so that transformers and the rest run as if it were absent.

    Returns why it is broken, or None. Only a run that asks for what needs it fails (with that reason).
    """
    if name in BROKEN_MODULES:
        return BROKEN_MODULES[name]
    if name in sys.modules or not module_present(name):
        return None
    try:
        __import__(name)
        return None
    except Exception as exc:  # noqa: BLE001 - whatever the import raises makes the module unusable
        reason = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
        BROKEN_MODULES[name] = reason
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        sys.modules[name] = None  # find_spec answers None, import raises ImportError: "absent"
        log.warning("%s is installed but fails to import (%s); runs that need it (device decode) will say so, "
                    "the others go on without it", name, reason)
        return reason


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
