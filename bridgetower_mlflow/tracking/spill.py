"""Spill files: written in whole lines, read back keeping every whole record, replayed into the tracking store.

A write appends whole lines in one call and is flushed to disk; one a full disk refuses is undone, so a
kill can cut only the write going on, never a line before it. A run holds its spill's lock
(hold_spill_lock) while it may write the file, and nobody else reads a locked file: there a cut last line
is a write going on. In a file whose writer is gone, a line that is not one whole record (a write a kill or
a full disk cut short, garbage a crash appended) is named in one warning, the whole records around it are
kept, and the file is moved aside as `<name>.damaged`: no later run replays it (upload-spill still reads it).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from ..errors import TrackingError
from ..redact import first_line
from .records import Record, parse_lines, send_records, to_line

log = logging.getLogger(__name__)
DAMAGED = ".damaged"
Records = list[tuple[str, Record]]


def append_whole(path: Path, text: str) -> None:
    """Append whole lines with one write, flushed to disk; a failed write is undone (the OSError is raised)."""
    data = text.encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start = os.fstat(fd).st_size
        if start and os.pread(fd, 1, start - 1) != b"\n":
            data = b"\n" + data  # never glue a record onto a line a dead writer left cut
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]  # a full disk ends a write short, then fails the next
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, start)
            raise
    finally:
        os.close(fd)


def replace_whole(path: Path, text: str, old_to: Path | None = None) -> None:
    """Replace the file's lines at once (a kill leaves the old file or the new one); `old_to` keeps the old."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        if old_to is not None:
            os.rename(path, old_to)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def read_spill(path: Path) -> tuple[Records, list[int]]:
    """(every whole record in file order, the numbers of the lines that are not one)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TrackingError(f"spill_file: cannot read {path} ({exc.strerror or exc})") from None
    return parse_lines(data)


def _aside_name(path: Path) -> Path:
    target, copy = path.with_name(path.name + DAMAGED), 1
    while target.exists():
        copy += 1
        target = path.with_name(f"{path.name}.{copy}{DAMAGED}")
    return target


def _damage(path: Path, bad: list[int], done: str, aside: Path) -> str:
    shown = ", ".join(map(str, bad[:3])) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
    which = f"line {shown} is" if len(bad) == 1 else f"lines {shown} are"
    return (f"{path}: {which} not a whole spill record (a write cut short, or garbage); {done}; "
            f"the file is kept as {aside}")


def adopt(path: Path, run_id: str) -> int:
    """A run's own spill file left by a killed process of the run: the number of whole records it holds.

    A damaged one is rewritten with only those; the original is moved aside.
    """
    if not path.exists():
        return 0
    records, bad = read_spill(path)
    if bad:
        aside = _aside_name(path)
        try:
            if records:
                replace_whole(path, "".join(to_line(run, record) for run, record in records), old_to=aside)
            else:
                os.rename(path, aside)
        except OSError as exc:
            raise TrackingError(f"spill_file: cannot rewrite {path} ({exc.strerror or exc})") from None
        log.warning("%s", _damage(path, bad, f"run {run_id} goes on with its {len(records)} whole records", aside))
    return len(records)


def upload_spill(path: Path | str) -> tuple[int, set[str]]:
    """Send every whole record in its order (re-sending is safe); delete the file, or move it aside if damaged.

    (metrics sent, run ids). A file its run still writes is left alone.
    """
    path = Path(path)
    with _unless_written(path) as free:
        if not free:
            raise TrackingError(f"spill_file: {path} is still being written by its run on this machine; "
                                "allowed: the spill file of a run that has ended")
        return _upload(path)


def _upload(path: Path) -> tuple[int, set[str]]:
    from mlflow.tracking import MlflowClient

    records, bad = read_spill(path)
    groups: list[tuple[str, list[Record]]] = []  # consecutive records of one run, in file order
    for run_id, record in records:
        if not groups or groups[-1][0] != run_id:
            groups.append((run_id, []))
        groups[-1][1].append(record)
    client, sent = MlflowClient(), 0
    try:
        for run_id, group in groups:
            sent += send_records(client, run_id, group)
    except Exception as exc:  # noqa: BLE001
        raise TrackingError(f"tracking: upload of {path} stopped after {sent} metrics: "
                            f"{first_line(exc)}; run the command again when the server is up") from None
    aside = path if path.name.endswith(DAMAGED) else _aside_name(path)
    try:
        if bad:
            path.rename(aside)
        else:
            path.unlink()
    except OSError as exc:
        raise TrackingError(f"spill_file: uploaded {path}, but cannot remove it ({exc.strerror or exc})") from None
    if bad:
        log.warning("%s", _damage(path, bad, f"its {len(records)} whole records were uploaded", aside))
    return sent, {run_id for run_id, _ in groups}


@contextlib.contextmanager
def _unless_written(spill: Path) -> Iterator[bool]:
    """Holds the spill's lock meanwhile; yields False (holding nothing) while a run on this machine writes it."""
    try:
        fd = os.open(spill.with_suffix(".lock"), os.O_RDONLY)
    except FileNotFoundError:
        yield True  # no run here ever wrote it (a run takes the lock before its first write)
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def hold_spill_lock(spill: Path) -> TextIO:
    """Held while a run may still write its spill file, so another run never replays it meanwhile."""
    spill.parent.mkdir(parents=True, exist_ok=True)
    handle = open(spill.with_suffix(".lock"), "w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def upload_leftovers(folder: Path) -> int:
    """At the start of a run: replay spill files earlier runs left (best effort); returns metrics sent."""
    total = 0
    for spill in sorted(Path(folder).glob("*.spill.jsonl")):
        with _unless_written(spill) as free:
            if not free or not spill.exists():
                continue  # its run is still going, or another run starting here replayed it just now
            try:
                sent, runs = _upload(spill)
                total += sent
                log.warning("replayed %d metrics an earlier run could not deliver (%s)", sent, ", ".join(sorted(runs)))
            except TrackingError as exc:
                log.warning("%s", exc)
    return total
