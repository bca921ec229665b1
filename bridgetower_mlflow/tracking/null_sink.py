"""Where non-zero ranks send metrics: nowhere (only rank 0 talks to MLflow)."""


class NullSink:
    def log_metric(self, key, value, step, timestamp=None) -> None:
        pass

    def log_metrics(self, metrics, step) -> None:
        pass

    def persist(self) -> None:
        pass
