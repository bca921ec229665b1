"""What software is installed, checked without importing it; a module that fails at import hidden as absent."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import sys

log = logging.getLogger(__name__)
HABANA_TORCH = "habana_frameworks.torch"  # Habana's PyTorch bridge (mediapipe shares the namespace)
BROKEN_MODULES: dict[str, str] = {}  # installed but failing at import: name -> why (sys.modules only says None)


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
        # find_spec answers None, import raises ImportError: "absent" (typeshed allows no None in sys.modules)
        sys.modules[name] = None  # type: ignore[assignment]
        log.warning("%s is installed but fails to import (%s); runs that need it (device decode) will say so, "
                    "the others go on without it", name, reason)
        return reason
