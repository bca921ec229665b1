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
    """(run_id, record) of one spill line (also reads the metric and status lines of older versions).

    ValueError when the line is not one whole record: a write cut short, garbage, JSON of another shape.
    """
    row = json.loads(line)
    if not isinstance(row, dict) or not isinstance(row.get("run_id"), str):
        raise ValueError("not a spill record")
    record: tuple[Any, ...]
    try:
        if "key" in row:
            record = ("metric", row["key"], row["value"], row["timestamp"], row["step"])
            whole = isinstance(record[1], str) and _number(record[2]) and _int(record[3]) and _int(record[4])
        elif "tags" in row:
            record = ("tags", row["tags"])
            whole = isinstance(record[1], dict)
        else:
            record = ("status", row["status"], row.get("end_time"))
            whole = isinstance(record[1], str) and (record[2] is None or _int(record[2]))
    except KeyError:
        whole = False
    if not whole:
        raise ValueError("not a spill record")
    return row["run_id"], record


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return _int(value) or isinstance(value, float)


def parse_lines(data: bytes) -> tuple[list[tuple[str, tuple[Any, ...]]], list[int]]:
    """Every whole record of a spill file's bytes in order, and the numbers (from 1) of the lines that are not one."""
    records, bad = [], []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append(from_line(line.decode("utf-8")))
        except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            bad.append(number)
    return records, bad


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
