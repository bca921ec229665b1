"""What a run's buffer queues, spills and sends: a metric, a set of tags or the end status, and their delivery.

Sending keeps their order (metrics before the tags and the status logged after them) and batches consecutive
metrics; re-sending any record is safe (the store skips identical metrics; tags and the status are idempotent).
The spill file's line for each is spelled in tracking.spill_format.
"""

from __future__ import annotations

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
