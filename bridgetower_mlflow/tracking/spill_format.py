"""A spill file's line for each record (tracking.records): one JSON object with the run's id.

{"run_id", "key", "value", "timestamp", "step"} is a metric, {"run_id", "tags"} a set of tags and
{"run_id", "status", "end_time"} the end status. The format is what files written by earlier versions hold:
they are still read and uploaded, so it does not change.
"""

from __future__ import annotations

import json
from typing import Any

from .records import MetricRecord, Record, StatusRecord, TagsRecord


def to_line(run_id: str, record: Record) -> str:
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
