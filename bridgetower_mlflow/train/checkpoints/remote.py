"""A run's checkpoints on the tracking server, under `checkpoints/`: list, download, delete.

An uploaded checkpoint is whole only when its marker is there: the uploader sends the marker after every other
file, so an upload cut by a kill is never resumed from. A download is verified against the marker (every file
at its size) before it is moved into place.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...disk_space import ensure_room, writing
from .wholeness import MARKER, PREFIX, STAGING, is_whole, marker_of, step_of

log = logging.getLogger(__name__)
ARTIFACT_DIR = "checkpoints"  # contract: the artifact folder users see in the UI


@dataclass(frozen=True)
class RemoteCheckpoints:
    """What the run holds under checkpoints/: whole ones and cut ones, highest step first (artifact paths)."""

    whole: tuple[str, ...]
    cut: tuple[str, ...]

    @property
    def latest_step(self) -> int:
        return step_of(Path(self.whole[0])) or 0 if self.whole else -1


def list_remote(client: Any, run_id: str) -> RemoteCheckpoints:
    """The run's uploaded checkpoints (none when it has no checkpoints/ folder)."""
    folders = [f.path for f in client.list_artifacts(run_id, ARTIFACT_DIR)
               if f.is_dir and step_of(Path(f.path)) is not None]
    folders.sort(key=lambda path: step_of(Path(path)) or 0, reverse=True)
    whole = tuple(path for path in folders
                  if any(Path(f.path).name == MARKER for f in client.list_artifacts(run_id, path)))
    return RemoteCheckpoints(whole, tuple(path for path in folders if path not in whole))


def download(client: Any, run_id: str, artifact_path: str, run_folder: Path) -> Path:
    """The uploaded checkpoint into run_folder/checkpoint-N, whole or not at all (room checked first)."""
    name = Path(artifact_path).name
    staging = run_folder / STAGING / f"download-{name}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        local = _fetch(client, run_id, artifact_path, staging)
        target = run_folder / name
        shutil.rmtree(target, ignore_errors=True)
        os.replace(local, target)
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fetch(client: Any, run_id: str, artifact_path: str, staging: Path) -> Path:
    name = Path(artifact_path).name
    marker = Path(client.download_artifacts(run_id, f"{artifact_path}/{MARKER}", str(staging)))
    listed = marker_of(marker.parent) or {}
    ensure_room("output_dir", f"{name} from the tracking server", staging, sum(listed.values()),
                why="the size its marker lists")
    with writing("output_dir", f"{name} from the tracking server", staging):
        local = Path(client.download_artifacts(run_id, artifact_path, str(staging)))
    if not is_whole(local):
        raise OSError(f"{artifact_path} downloaded with files missing or cut short")
    return local


def delete_older(client: Any, run_id: str, keep: str) -> bool:
    """Delete every uploaded checkpoint below `keep`'s step; False where the artifact store allows no deletes."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    kept = step_of(Path(keep)) or 0
    listed = list_remote(client, run_id)
    older = [p for p in (*listed.whole, *listed.cut) if (step_of(Path(p)) or 0) < kept]
    if not older:
        return True
    repository = get_artifact_repository(client.get_run(run_id).info.artifact_uri)
    for path in older:
        try:
            repository.delete_artifacts(path)  # type: ignore[no-untyped-call]
        except NotImplementedError:
            return False
    return True


def artifact_path_of(folder: Path) -> str:
    """checkpoints/checkpoint-N for a local checkpoint-N folder."""
    assert folder.name.startswith(PREFIX)
    return f"{ARTIFACT_DIR}/{folder.name}"
