"""Replay a spill file (metrics and end status a run could not deliver) into the tracking store."""

from __future__ import annotations

import json
from pathlib import Path

from ..contract import METRICS_PER_BATCH
from ..errors import TrackingError


def upload_spill(path) -> tuple[int, set]:
    """Send every spilled metric (re-sending is safe: identical metrics are skipped); delete the file."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client, path = MlflowClient(), Path(path)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    metrics: dict[str, list] = {}
    statuses = {}
    for row in rows:
        if "key" in row:
            metric = Metric(row["key"], row["value"], row["timestamp"], row["step"])
            metrics.setdefault(row["run_id"], []).append(metric)
        elif "status" in row:
            statuses[row["run_id"]] = (row["status"], row.get("end_time"))
    sent = 0
    try:
        for run_id, items in metrics.items():
            for start in range(0, len(items), METRICS_PER_BATCH):
                chunk = items[start:start + METRICS_PER_BATCH]
                client.log_batch(run_id, metrics=chunk, synchronous=True)
                sent += len(chunk)
        for run_id, (status, end_time) in statuses.items():
            client.set_terminated(run_id, status, end_time)
    except Exception as exc:  # noqa: BLE001
        raise TrackingError(f"tracking: upload of {path} stopped after {sent} metrics: "
                            f"{str(exc).splitlines()[0][:200]}; run the command again when the server is up") from None
    path.unlink()
    return sent, set(metrics) | set(statuses)


def hold_spill_lock(spill: Path):
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
