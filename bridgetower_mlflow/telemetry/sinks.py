"""Where telemetry sends what it measures: a MetricSink. Rank 0's is its run's MetricBuffer (tracking/); other ranks
send to the NullSink, since only rank 0 talks to MLflow."""

from __future__ import annotations

from typing import Protocol


class MetricSink(Protocol):
    """Takes metrics without blocking the step loop; `persist` makes what it holds survive the process."""

    def log_metric(self, key: str, value: float, step: int, timestamp: int | None = None) -> None: ...

    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...

    def persist(self) -> None: ...


class NullSink:
    """A MetricSink that keeps nothing."""

    def log_metric(self, key: str, value: float, step: int, timestamp: int | None = None) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        pass

    def persist(self) -> None:
        pass
