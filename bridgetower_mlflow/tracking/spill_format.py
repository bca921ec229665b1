"""What the run buffer queues and spills: metrics, tags and the end status, one JSON line each.

A record is ("metric", key, value, timestamp_ms, step), ("tags", {key: value}) or
("status", status, end_time_ms). Sending keeps their order (metrics before the tags and the status
logged after them) and batches consecutive metrics; re-sending any record is safe.
"""

from __future__ import annotations

import json
from typing import Any

from ..contract import METRICS_PER_BATCH


def to_line(run_id: str, record: tuple[Any, ...]) -> str:
    kind = record[0]
    if kind == "metric":
        _, key, value, timestamp, step = record
        row = {"run_id": run_id, "key": key, "value": value, "timestamp": timestamp, "step": step}
    elif kind == "tags":
        row = {"run_id": run_id, "tags": record[1]}
    else:
        row = {"run_id": run_id, "status": record[1], "end_time": record[2]}
    return json.dumps(row) + "\n"


def from_line(line: str) -> tuple[str, tuple[Any, ...]]:
    """(run_id, record) of one spill line (also reads the metric and status lines of older versions)."""
    row = json.loads(line)
    if "key" in row:
        return row["run_id"], ("metric", row["key"], row["value"], row["timestamp"], row["step"])
    if "tags" in row:
        return row["run_id"], ("tags", row["tags"])
    return row["run_id"], ("status", row["status"], row.get("end_time"))


def send_records(client: Any, run_id: str, records: list[tuple[Any, ...]]) -> int:
    """Deliver `records` in order; consecutive metrics go in batches. Returns the metrics sent."""
    from mlflow.entities import Metric, RunTag

    metrics: list[Any] = []
    sent = 0

    def flush_metrics() -> int:
        for start in range(0, len(metrics), METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=metrics[start:start + METRICS_PER_BATCH], synchronous=True)
        count = len(metrics)
        metrics.clear()
        return count

    for record in records:
        if record[0] == "metric":
            metrics.append(Metric(record[1], record[2], record[3], record[4]))
            continue
        sent += flush_metrics()
        if record[0] == "tags":
            client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in record[1].items()], synchronous=True)
        else:
            client.set_terminated(run_id, record[1], record[2])
    return sent + flush_metrics()
