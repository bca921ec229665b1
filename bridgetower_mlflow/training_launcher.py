"""devices > 1 without an outer launcher: create the run, start the ranks, settle the run's status."""

from __future__ import annotations

import logging
import os

from .config import to_cli_args
from .errors import BridgeTowerMlflowError
from .tracking import train_record

log = logging.getLogger(__name__)


class LaunchFailed(BridgeTowerMlflowError):
    exit_code = 1


def _create_run(config, device) -> str:
    from mlflow.tracking import MlflowClient
    import mlflow

    from .tracking.context import context_tags
    from .tracking.run_session import tracking_error

    try:
        if os.environ.get("MLFLOW_RUN_ID"):
            return os.environ["MLFLOW_RUN_ID"]
        experiment = mlflow.set_experiment(config.experiment_name) if config.experiment_name else None
        experiment_id = experiment.experiment_id if experiment else mlflow.tracking.fluent._get_experiment_id()
        tags = {**context_tags(device), train_record.RUN_KIND_TAG: "train"}
        run = MlflowClient().create_run(experiment_id, tags=tags, run_name=train_record.run_name(config, device.kind))
        return run.info.run_id
    except Exception as exc:  # noqa: BLE001
        raise tracking_error("create the run", exc) from None


def launch_and_wait(config, adapter, device, launch_ranks):
    """Rank 0 of the children resumes the run; a crash leaves it FAILED, never RUNNING."""
    from mlflow.tracking import MlflowClient

    from .training import TrainResult

    run_id = _create_run(config, device)
    code = launch_ranks(adapter, config.devices, ["train", *to_cli_args(config)], run_id)
    client = MlflowClient()
    run = client.get_run(run_id)
    if run.info.status == "RUNNING":
        client.set_terminated(run_id, "FINISHED" if code == 0 else "FAILED")
    if code != 0:
        raise LaunchFailed(f"devices: {config.devices} ranks were launched and one failed (exit {code}); "
                           f"see the rank output above; run {run_id} is marked FAILED")
    return TrainResult(run_id, dict(client.get_run(run_id).data.metrics))
