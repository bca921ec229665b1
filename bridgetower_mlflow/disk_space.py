"""A full disk in one line: what was being written, the folder, what it needed and what was free, what to do.

Stdlib only, so every command can use it around its writes (train's checkpoints and model, the logged model on a
file store, sweep and compare outputs). A full disk, a quota and a read-only file system are environment failures:
DiskFull, exit status 1.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from .errors import DiskFull

REASONS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
           errno.EROFS: "read-only file system"}
# What libraries say when they hide the errno: safetensors ("... (os error 28)"), the C library's text, and
# torch.save's zip writer, which reports a short write only as a position mismatch or a stream error
_TEXTS = {"os error 28": errno.ENOSPC, "no space left on device": errno.ENOSPC, "os error 122": errno.EDQUOT,
          "disk quota exceeded": errno.EDQUOT, "os error 30": errno.EROFS, "read-only file system": errno.EROFS}
_SHORT_WRITES = ("unexpected pos", "basic_ios::clear", "iostream error", "file write failed")
NEARLY_FULL = 1 << 20  # bytes free under which a write that failed without its errno is taken for a full disk
FREE_SPACE = "free space there"


def free_bytes(folder: str | Path) -> int | None:
    """Bytes this user may still write where `folder` is (or would be created); None when unknown."""
    path = Path(folder).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def disk_errno(exc: BaseException, folder: str | Path | None = None) -> int | None:
    """ENOSPC, EDQUOT or EROFS when `exc` says so (in its errno or its text); a short write by torch.save counts
    as ENOSPC when `folder` is nearly full. None for every other failure."""
    code = getattr(exc, "errno", None)
    if code in REASONS:
        return int(code)
    text = str(exc).lower()
    found = next((value for key, value in _TEXTS.items() if key in text), None)
    if found is not None:
        return found
    if folder is not None and any(key in text for key in _SHORT_WRITES):
        free = free_bytes(folder)
        return errno.ENOSPC if free is not None and free < NEARLY_FULL else None
    return None


def full_line(field: str, what: str, folder: str | Path, needed: str = "", advice: str = FREE_SPACE,
              code: int | None = errno.ENOSPC) -> str:
    """`output_dir: no space left on device for checkpoint-8 in '/data/run' (needs 6.3 MB: the size of
    checkpoint-4; 1.9 MB free); free space there or ...`. `code` None: refused before writing (not enough room)."""
    free = free_bytes(folder)
    sizes = "; ".join(part for part in (f"needs {needed}" if needed else "",
                                        f"{megabytes(free)} free" if free is not None else "") if part)
    if code == errno.EROFS:
        advice = f"make it writable or choose another {field}"
    reason = REASONS[code] if code is not None else "not enough free space"
    return f"{field}: {reason} for {what} in {str(folder)!r}" + (f" ({sizes})" if sizes else "") + f"; {advice}"


def ensure_room(field: str, what: str, folder: str | Path, needed: int, advice: str = FREE_SPACE,
                why: str = "") -> None:
    """Refuse before writing anything when `needed` bytes will not fit (no torn file is left behind)."""
    free = free_bytes(folder)
    if free is not None and free < needed:
        raise DiskFull(full_line(field, what, folder, megabytes(needed) + (f": {why}" if why else ""), advice, None))


@contextlib.contextmanager
def writing(field: str, what: str, folder: str | Path, advice: str = FREE_SPACE) -> Iterator[None]:
    """Around a write: a full disk, a quota or a read-only folder becomes DiskFull's one line; others pass.

    For sweep and compare outputs too: `with writing("output", "the comparison table", folder): ...`."""
    try:
        yield
    except DiskFull:
        raise
    except Exception as exc:
        code = disk_errno(exc, folder)
        if code is None:
            raise
        filename = written_file(exc)
        where = Path(filename).parent if filename else folder
        raise DiskFull(full_line(field, what, where, advice=advice, code=code)) from None


def written_file(exc: BaseException) -> str | None:
    """The file a failed write was writing: a copy's destination (filename2), else the file named."""
    name = getattr(exc, "filename2", None) or getattr(exc, "filename", None)
    return str(name) if name else None


def tree_bytes(folder: str | Path) -> int:
    """Bytes of the files under `folder` (0 when it is gone)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_size
    return total
