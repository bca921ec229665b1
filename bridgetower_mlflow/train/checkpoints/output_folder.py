"""The output folder: it takes checkpoints and the model (or the run says so in one `output_dir:` line), and
belongs to one train at a time."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ...disk_space import disk_errno, full_line, writing, written_file
from ...errors import ConfigError, DiskFull, OutputUnwritable
from ...redact import first_line
from .wholeness import MARKER, PREFIX, checkpoint_bytes, latest_whole

log = logging.getLogger(__name__)
ROOM_ADVICE = "free space there or choose another output_dir"
CHECKPOINT_ADVICE = ("free space there or set save_total_limit for new runs (--hf-args '--save_total_limit 1' keeps "
                     "only the latest checkpoint)")


def check_writable(output_dir: str) -> None:
    """Before any run starts: the folder exists (created) and takes a byte (a full disk is one line, exit 1)."""
    try:
        with writing("output_dir", "a first file", output_dir, ROOM_ADVICE):
            Path(output_dir).mkdir(parents=True, exist_ok=True)
            handle, probe = tempfile.mkstemp(dir=output_dir, prefix=".write-check-")
            try:
                os.write(handle, b"x")  # unbuffered: a full disk answers here, not in a later close
            finally:
                os.close(handle)
                os.unlink(probe)
    except OSError as exc:
        raise unwritable(output_dir, exc) from None


@contextlib.contextmanager
def writes_into(output_dir: str) -> Iterator[None]:
    """A write failure inside the folder (a checkpoint, the model) becomes one line; other errors pass.

    A full disk (or quota, or read-only file system) is DiskFull, exit 1; any other refused write OutputUnwritable.
    """
    try:
        yield
    except DiskFull:
        raise
    except Exception as exc:  # torch.save reports a failed write as RuntimeError, safetensors as its own type
        code = disk_errno(exc, output_dir)
        if code is not None:
            raise disk_full(output_dir, exc, code) from None
        if not isinstance(exc, (OSError, RuntimeError)) or not _about(exc, Path(output_dir)):
            raise
        raise unwritable(output_dir, exc) from None


def disk_full(output_dir: str, exc: BaseException, code: int) -> DiskFull:
    """The line for a write the disk cut: the checkpoint (or model) it tore, what the last whole one needed."""
    torn = _torn_by(output_dir, written_file(exc))
    if torn is None:
        return DiskFull(full_line("output_dir", "a file", output_dir, advice=ROOM_ADVICE, code=code))
    previous = latest_whole(torn.parent) if torn.name.startswith(PREFIX) else None
    needed = f"{checkpoint_bytes(previous) / 1e6:.1f} MB: the size of {previous.name}" if previous else ""
    advice = CHECKPOINT_ADVICE if torn.name.startswith(PREFIX) else ROOM_ADVICE
    return DiskFull(full_line("output_dir", f"{torn.name} (left incomplete: the next resume removes it)",
                              torn.parent, needed, advice, code))


def _torn_by(output_dir: str, filename: str | None) -> Path | None:
    """The folder a failed write was filling: its file's checkpoint or model folder, else the newest unmarked
    checkpoint or model folder of the output folder's runs (torch's writer does not say which file failed)."""
    root = Path(output_dir).resolve()
    if filename:
        path = Path(filename).resolve()
        inside = [p for p in path.parents if p.parent.parent == root]
        return inside[0] if inside and path.is_relative_to(root) else None
    candidates = [p for p in root.glob("*/*") if p.is_dir() and not (p / MARKER).exists()
                  and (p.name.startswith(PREFIX) or p.name == "final-model")]
    return max(candidates, key=lambda p: p.stat().st_mtime, default=None)


def unwritable(output_dir: str, exc: Exception) -> OutputUnwritable:
    reason = getattr(exc, "strerror", None) or first_line(exc, 200)
    filename = getattr(exc, "filename", None)
    where = f" at {filename}" if filename else ""
    return OutputUnwritable(f"output_dir: cannot write into {output_dir!r} ({reason}{where}); allowed: a folder "
                            "this user can create and write, with room for checkpoints and the model")


def _about(exc: Exception, folder: Path) -> bool:
    filename = getattr(exc, "filename", None)
    if filename:
        return Path(filename).resolve().is_relative_to(folder.resolve())
    return isinstance(exc, RuntimeError) and (str(folder) in str(exc) or str(folder.resolve()) in str(exc))


LOCK_FILE = ".bridgetower-train.lock"


@contextlib.contextmanager
def holding(output_dir: str) -> Iterator[None]:
    """The folder is this train's while it runs: a second train (or a resume) into it is refused in one line.

    An flock the kernel drops when the holder dies, so a SIGKILLed train leaves no lock behind, only its pid.
    """
    import fcntl

    path = Path(output_dir) / LOCK_FILE
    with writing("output_dir", f"its lock file {LOCK_FILE}", output_dir, ROOM_ADVICE):
        handle = open(path, "a+b", buffering=0)  # unbuffered: a full disk answers at the write, not at close
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().decode(errors="replace").strip() or "unknown"
            raise ConfigError("output_dir", output_dir, f"allowed: a folder no other train is using (pid {holder} "
                              "is training into it: wait for it to end, or choose another output_dir)") from None
        handle.seek(0)
        earlier = handle.read().decode(errors="replace").strip()
        if earlier and earlier != str(os.getpid()):
            log.info("output_dir %s: pid %s held it and is gone; taking it over", output_dir, earlier)
        with writing("output_dir", f"its lock file {LOCK_FILE}", output_dir, ROOM_ADVICE):
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()).encode())
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
