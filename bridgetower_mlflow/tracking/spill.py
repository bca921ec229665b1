"""Replay a spill file (metrics, tags and the end status a run could not deliver) into the tracking store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from ..errors import TrackingError
from .spill_format import from_line, send_records


def upload_spill(path: Path | str) -> tuple[int, set[str]]:
    """Send every spilled record in its order (re-sending is safe); delete the file. (metrics sent, run ids)."""
    from mlflow.tracking import MlflowClient

    client, path = MlflowClient(), Path(path)
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    groups: list[tuple[str, list[tuple[Any, ...]]]] = []  # consecutive records of one run, in file order
    for run_id, record in map(from_line, lines):
        if not groups or groups[-1][0] != run_id:
            groups.append((run_id, []))
        groups[-1][1].append(record)
    sent = 0
    try:
        for run_id, records in groups:
            sent += send_records(client, run_id, records)
    except Exception as exc:  # noqa: BLE001
        raise TrackingError(f"tracking: upload of {path} stopped after {sent} metrics: "
                            f"{str(exc).splitlines()[0][:200]}; run the command again when the server is up") from None
    path.unlink()
    return sent, {run_id for run_id, _ in groups}


def hold_spill_lock(spill: Path) -> TextIO:
    """Held while a run may still write its spill file, so another run never replays it meanwhile."""
    import fcntl

    spill.parent.mkdir(parents=True, exist_ok=True)
    handle = open(spill.with_suffix(".lock"), "w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def upload_leftovers(folder: Path) -> int:
    """At the start of a run: replay spill files earlier runs left (best effort); returns metrics sent."""
    import fcntl
    import logging

    log, total = logging.getLogger(__name__), 0
    for spill in sorted(Path(folder).glob("*.spill.jsonl")):
        with open(spill.with_suffix(".lock"), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its run is still going
            try:
                sent, runs = upload_spill(spill)
                total += sent
                log.warning("replayed %d metrics an earlier run could not deliver (%s)", sent, ", ".join(sorted(runs)))
            except TrackingError as exc:
                log.warning("%s", exc)
    return total
