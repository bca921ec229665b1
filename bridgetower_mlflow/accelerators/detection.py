"""Shared detection helpers: package versions, process counts, label checks, "allowed here"."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

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


def world_size(devices: int) -> int:
    """Processes in the job: an outer launcher's WORLD_SIZE (or MPI size) wins over `devices`."""
    for key in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        if os.environ.get(key, "").isdigit():
            return max(int(os.environ[key]), 1)
    return devices


def local_processes(devices: int) -> int:
    """Devices this node must hold: the launcher's local size, else `devices`."""
    for key in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"):
        if os.environ.get(key, "").isdigit():
            return max(int(os.environ[key]), 1)
    return devices


def local_rank() -> int:
    for key in ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return 0


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
