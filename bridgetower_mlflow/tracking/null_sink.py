"""Where non-zero ranks send metrics: nowhere (only rank 0 talks to MLflow)."""


class NullSink:
    def log_metric(self, key: str, value: float, step: int, timestamp: int | None = None) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        pass

    def persist(self) -> None:
        pass
