"""The output folder takes checkpoints and the model, or the run says so in one `output_dir:` line."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from ..errors import OutputUnwritable


def check_writable(output_dir: str) -> None:
    """Before any run starts: the folder exists (created) and takes a file."""
    try:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=output_dir, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise unwritable(output_dir, exc) from None


@contextlib.contextmanager
def writes_into(output_dir: str):
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
