"""Which checkpoints are whole: a marker written after all of a checkpoint's files, listing them with their sizes.

Trainer writes a checkpoint's files one by one (model, optimizer, scheduler, RNG state, trainer_state.json last);
a kill, a full disk or an upload cut short leaves a folder that looks like a checkpoint and is not one. Only a
checkpoint whose marker is present, and whose listed files are all there at their sizes, is resumed from or
uploaded. Folders a release before the marker wrote count as whole when their trainer_state.json is (Trainer's
last file), so an upgrade never costs a resume.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

MARKER = "checkpoint-complete.json"
PREFIX = "checkpoint-"
STAGING = ".checkpoint-staging"  # downloads and upload snapshots: never a checkpoint Trainer would pick


def step_of(folder: Path) -> int | None:
    suffix = folder.name[len(PREFIX):] if folder.name.startswith(PREFIX) else ""
    return int(suffix) if suffix.isdigit() else None


def checkpoints_in(run_folder: str | Path) -> list[Path]:
    """The run folder's checkpoint-N folders, highest step first."""
    found = [p for p in Path(run_folder).glob(f"{PREFIX}*") if p.is_dir() and step_of(p) is not None]
    return sorted(found, key=lambda p: step_of(p) or 0, reverse=True)


def file_sizes(folder: Path) -> dict[str, int]:
    """Every file under `folder` but the marker, by its path relative to `folder`."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != MARKER}


def write_marker(folder: Path, step: int) -> None:
    """Mark `folder` whole: written to a temporary name, flushed, then renamed (a reader never sees half)."""
    files = file_sizes(folder)
    partial = folder / f".{MARKER}.partial"
    handle = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.write(handle, json.dumps({"global_step": step, "files": files}).encode())
            os.fsync(handle)
        finally:
            os.close(handle)
        os.replace(partial, folder / MARKER)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def marker_of(folder: Path) -> dict[str, int] | None:
    """The files and sizes the marker lists; None when there is no readable marker."""
    try:
        listed = json.loads((folder / MARKER).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {str(k): int(v) for k, v in listed.items()} if isinstance(listed, dict) else None


def is_whole(folder: Path, legacy: bool = False) -> bool:
    """All the marker's files are there at their sizes (or, for a `legacy` folder, trainer_state.json is whole)."""
    listed = marker_of(folder)
    if listed is None:
        return legacy and _has_state(folder)
    return all(_size(folder / name) == size for name, size in listed.items())


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _has_state(folder: Path) -> bool:
    try:
        return "global_step" in json.loads((folder / "trainer_state.json").read_text())
    except (OSError, ValueError, TypeError):
        return False


def sorted_by_wholeness(run_folder: str | Path) -> tuple[list[Path], list[Path]]:
    """(whole, torn) checkpoints of the run folder, highest step first."""
    found = checkpoints_in(run_folder)
    legacy = not any((p / MARKER).exists() for p in found)
    whole = [p for p in found if is_whole(p, legacy)]
    return whole, [p for p in found if p not in whole]


def latest_whole(run_folder: str | Path) -> Path | None:
    whole, _ = sorted_by_wholeness(run_folder)
    return whole[0] if whole else None


def checkpoint_bytes(folder: Path) -> int:
    return sum(file_sizes(folder).values())


def remove_torn(run_folder: str | Path) -> list[str]:
    """Remove the run folder's torn checkpoints and leftover staging, one warning naming each; returns their names.

    Only for a folder this process owns: the run it trains or resumes (a sweep's other cells write elsewhere)."""
    _, torn = sorted_by_wholeness(run_folder)
    for folder in torn:
        log.warning("removing %s: an incomplete checkpoint (its save was cut short; no %s)", folder, MARKER)
        shutil.rmtree(folder, ignore_errors=True)
    staging = Path(run_folder) / STAGING
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
    return [p.name for p in torn]
