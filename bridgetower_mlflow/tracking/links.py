"""Where to look at a run: the MLflow UI link of a run or an experiment's runs table."""

from __future__ import annotations

import shlex

LOCAL_UI = "http://127.0.0.1:5000"
TRAINING_VIEW = "workflowType=machine_learning"  # the UI's Model training view


def runs_view_url(experiment_id: str, run_id: str | None = None) -> tuple[str, str | None]:
    """(url, how to start the UI first or None): the run's page or the runs table, both in the 'Model training' view
    (MLflow 3.17's UI opens a page without workflowType in its GenAI view, whatever the experiment's kind tag)."""
    import mlflow

    from ..redact import redact_text

    uri = mlflow.get_tracking_uri()
    if uri.startswith(("http://", "https://")):
        base, hint = redact_text(uri.rstrip("/")), None
    else:
        base, hint = LOCAL_UI, ui_command(uri)
    path = f"/#/experiments/{experiment_id}/runs/{run_id}" if run_id else f"/#/experiments/{experiment_id}/runs"
    return f"{base}{path}?{TRAINING_VIEW}", hint


def ui_command(store_uri: str) -> str:
    """`mlflow ui` over a local or database store, the URI one shell word and its password never shown."""
    from ..redact import REDACTED, without_password

    shown = without_password(store_uri)
    command = f"mlflow ui --backend-store-uri {shlex.quote(shown)} --port 5000"
    return command if shown == store_uri else f"{command}; the password is left out: write it in place of {REDACTED}"
