"""The output folder: it takes checkpoints and the model (or the run says so in one `output_dir:` line), and
belongs to one train at a time."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigError, OutputUnwritable

log = logging.getLogger(__name__)


def check_writable(output_dir: str) -> None:
    """Before any run starts: the folder exists (created) and takes a file."""
    try:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=output_dir, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise unwritable(output_dir, exc) from None


@contextlib.contextmanager
def writes_into(output_dir: str) -> Iterator[None]:
    """A write failure inside the folder (a checkpoint, the model) becomes one line; other errors pass."""
    try:
        yield
    except (OSError, RuntimeError) as exc:  # torch.save reports a failed file write as RuntimeError
        if not _about(exc, Path(output_dir)):
            raise
        raise unwritable(output_dir, exc) from None


def unwritable(output_dir: str, exc: Exception) -> OutputUnwritable:
    reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0][:200]
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
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise ConfigError("output_dir", output_dir, f"allowed: a folder no other train is using (pid {holder} "
                              "is training into it: wait for it to end, or choose another output_dir)") from None
        handle.seek(0)
        earlier = handle.read().strip()
        if earlier and earlier != str(os.getpid()):
            log.info("output_dir %s: pid %s held it and is gone; taking it over", output_dir, earlier)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
