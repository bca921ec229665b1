"""checkpoint_upload: each saved checkpoint logged as run artifacts under checkpoints/, off the step loop.

on_save hands the checkpoint to an uploader thread, which snapshots it first (hard links: no copy, and Trainer's
rotation cannot delete a file mid-upload), sends every file and the marker last, then deletes the older uploads
where the artifact store allows it. A newer checkpoint queued meanwhile replaces one not started yet: only the
latest matters to a resume. A failed upload is a warning: training goes on, the local checkpoint stays.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from ...redact import first_line
from .remote import artifact_path_of, delete_older
from .wholeness import MARKER, STAGING, file_sizes

log = logging.getLogger(__name__)


class CheckpointUploader:
    """One run's uploads: a thread that sends the latest checkpoint handed to it, one at a time."""

    def __init__(self, client: Any, run_id: str, run_folder: Path) -> None:
        self.client, self.run_id, self.run_folder = client, run_id, run_folder
        self.uploaded: str | None = None  # artifact path of the last whole upload
        self._next: Path | None = None
        self._busy = False
        self._deletes = True  # until the store says it allows none
        self._closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="checkpoint-upload", daemon=True)
        self._thread.start()

    def submit(self, checkpoint: Path) -> None:
        """Queue `checkpoint` (a whole one); an earlier one not started yet is dropped."""
        snapshot = self._snapshot(checkpoint)
        with self._changed:
            dropped, self._next = self._next, snapshot
            self._changed.notify_all()
        if dropped is not None:
            shutil.rmtree(dropped, ignore_errors=True)

    def _snapshot(self, checkpoint: Path) -> Path:
        """Hard links of the checkpoint's files in the staging folder (the folder itself where links fail)."""
        target = self.run_folder / STAGING / f"upload-{checkpoint.name}"
        shutil.rmtree(target, ignore_errors=True)
        try:
            shutil.copytree(checkpoint, target, copy_function=os.link)
            return target
        except OSError as exc:
            log.warning("checkpoint upload: cannot link %s (%s); uploading it in place", checkpoint, exc)
            shutil.rmtree(target, ignore_errors=True)
            return checkpoint

    def wait(self, timeout: float) -> bool:
        """Until nothing is queued or sending (True), or `timeout` s (False: the rest is abandoned)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._next is None and not self._busy, timeout)

    def close(self) -> None:
        """The thread ends (after the upload in flight, if any); nothing queued later is sent."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._next is not None or self._closed)
                if self._closed:
                    return
                folder, self._next, self._busy = self._next, None, True
            assert folder is not None
            try:
                self._upload(folder)
            except Exception as exc:  # noqa: BLE001 - the local checkpoint stays; the next save tries again
                log.warning("checkpoint upload of %s failed: %s", folder.name, first_line(exc, 300))
            finally:
                if folder.parent.name == STAGING:
                    shutil.rmtree(folder, ignore_errors=True)
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _upload(self, folder: Path) -> None:
        name = folder.name.removeprefix("upload-")
        artifact_path = artifact_path_of(Path(name))
        for relative in file_sizes(folder):  # every file but the marker
            parent = str(Path(artifact_path, relative).parent)
            self.client.log_artifact(self.run_id, str(folder / relative), parent)
        self.client.log_artifact(self.run_id, str(folder / MARKER), artifact_path)  # last: now it is whole
        self.uploaded = artifact_path
        if self._deletes and not delete_older(self.client, self.run_id, artifact_path):
            self._deletes = False
            log.warning("checkpoint upload: the artifact store allows no deletes; older checkpoints stay there")


_uploaders: dict[str, CheckpointUploader] = {}  # by run id: the callback submits, the run's end waits
_lock = threading.Lock()


def uploader_for(client: Any, run_id: str, run_folder: Path) -> CheckpointUploader:
    """The run's uploader (started at its first checkpoint)."""
    with _lock:
        if run_id not in _uploaders:
            _uploaders[run_id] = CheckpointUploader(client, run_id, run_folder)
        return _uploaders[run_id]


def settle_uploads(run_id: str, timeout: float) -> str | None:
    """At the run's end: wait up to `timeout` s for the upload in flight; returns the last whole upload."""
    with _lock:
        uploader = _uploaders.pop(run_id, None)
    if uploader is None:
        return None
    if not uploader.wait(timeout):
        log.warning("checkpoint upload still running after %.0f s; the last whole one on the server is %s",
                    timeout, uploader.uploaded or "none")
    uploader.close()
    return uploader.uploaded
