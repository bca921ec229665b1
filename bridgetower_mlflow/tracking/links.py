"""Where to look at a run: the MLflow UI link of a run or an experiment's runs table."""

from __future__ import annotations


def runs_view_url(experiment_id: str, run_id: str | None = None) -> tuple[str, str | None]:
    """(url, how to start the UI first or None); the runs table is the 'Model training' view."""
    import mlflow

    from ..redact import redact_text

    uri = mlflow.get_tracking_uri()
    if uri.startswith(("http://", "https://")):
        base, hint = redact_text(uri.rstrip("/")), None
    else:
        base, hint = "http://127.0.0.1:5000", f"mlflow ui --backend-store-uri {uri} --port 5000"
    path = f"/#/experiments/{experiment_id}/runs/{run_id}" if run_id else \
        f"/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
    return base + path, hint
