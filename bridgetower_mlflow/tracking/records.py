"""What a run's buffer queues, spills and sends: a metric, a set of tags or the end status, their spill line, and
their delivery.

Sending keeps their order (metrics before the tags and the status logged after them) and batches consecutive
metrics; re-sending any record is safe (the store skips identical metrics; tags and the status are idempotent).

A spill file's line is one JSON object with the run's id: {"run_id", "key", "value", "timestamp", "step"} is a
metric, {"run_id", "tags"} a set of tags and {"run_id", "status", "end_time"} the end status. The format is what
files written by earlier versions hold: they are still read and uploaded, so it does not change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..contract import METRICS_PER_BATCH


@dataclass(frozen=True)
class MetricRecord:
    key: str
    value: float
    timestamp: int  # ms since the epoch
    step: int


@dataclass(frozen=True)
class TagsRecord:
    tags: dict[str, Any]  # a copy the record owns; values are sent as str


@dataclass(frozen=True)
class StatusRecord:
    status: str
    end_time: int | None  # ms since the epoch; None in lines of older versions


Record = MetricRecord | TagsRecord | StatusRecord


def to_line(run_id: str, record: Record) -> str:
    """The record's spill line, newline included."""
    row: dict[str, Any]
    if isinstance(record, MetricRecord):
        row = {"run_id": run_id, "key": record.key, "value": record.value, "timestamp": record.timestamp,
               "step": record.step}
    elif isinstance(record, TagsRecord):
        row = {"run_id": run_id, "tags": record.tags}
    else:
        row = {"run_id": run_id, "status": record.status, "end_time": record.end_time}
    return json.dumps(row) + "\n"


def from_line(line: str) -> tuple[str, Record]:
    """(run_id, record) of one spill line (also reads the metric and status lines of older versions).

    ValueError when the line is not one whole record: a write cut short, garbage, JSON of another shape.
    """
    row = json.loads(line)
    if not isinstance(row, dict) or not isinstance(row.get("run_id"), str):
        raise ValueError("not a spill record")
    try:
        record = _record(row)
    except KeyError:
        record = None
    if record is None:
        raise ValueError("not a spill record")
    return row["run_id"], record


def _record(row: dict[str, Any]) -> Record | None:
    """The record a row holds, None when a field has the wrong type (KeyError when one is missing)."""
    if "key" in row:
        key, value, timestamp, step = row["key"], row["value"], row["timestamp"], row["step"]
        whole = isinstance(key, str) and _number(value) and _int(timestamp) and _int(step)
        return MetricRecord(key, value, timestamp, step) if whole else None
    if "tags" in row:
        return TagsRecord(row["tags"]) if isinstance(row["tags"], dict) else None
    status, end_time = row["status"], row.get("end_time")
    return StatusRecord(status, end_time) if isinstance(status, str) and (end_time is None or _int(end_time)) else None


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return _int(value) or isinstance(value, float)


def parse_lines(data: bytes) -> tuple[list[tuple[str, Record]], list[int]]:
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


def send_records(client: Any, run_id: str, records: list[Record]) -> int:
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
        if isinstance(record, MetricRecord):
            metrics.append(Metric(record.key, record.value, record.timestamp, record.step))
            continue
        sent += flush_metrics()
        if isinstance(record, TagsRecord):
            client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in record.tags.items()], synchronous=True)
        else:
            client.set_terminated(run_id, record.status, record.end_time)
    return sent + flush_metrics()
