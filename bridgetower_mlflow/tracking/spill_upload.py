"""Replay a spill file (metrics and end status a run could not deliver) into the tracking store."""

from __future__ import annotations

import json
from pathlib import Path

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
            metrics.setdefault(row["run_id"], []).append(Metric(row["key"], row["value"], row["timestamp"], row["step"]))
        elif "status" in row:
            statuses[row["run_id"]] = (row["status"], row.get("end_time"))
    sent = 0
    try:
        for run_id, items in metrics.items():
            for start in range(0, len(items), 900):
                client.log_batch(run_id, metrics=items[start:start + 900], synchronous=True)
                sent += len(items[start:start + 900])
        for run_id, (status, end_time) in statuses.items():
            client.set_terminated(run_id, status, end_time)
    except Exception as exc:  # noqa: BLE001
        raise TrackingError(f"tracking: upload of {path} stopped after {sent} metrics: "
                            f"{str(exc).splitlines()[0][:200]}; run the command again when the server is up") from None
    path.unlink()
    return sent, set(metrics) | set(statuses)
