"""The launcher's flow: devices > 1 without an outer launcher. This process creates the run, starts the ranks
(each a `train` of its own, rank 0 logging into that run) and settles the run's status from their exit.

In train/, not launch/: it creates and settles an MLflow run, which the launch layer sits below."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import to_cli_args
from ..contract import RUN_KIND_TAG, RUN_KIND_TRAIN
from ..errors import LaunchFailed
from ..launch.signals import Stopped
from ..redact import first_line
from .checkpoints.resume import run_to_resume
from .record import device_tags, run_name
from .result import TrainResult

if TYPE_CHECKING:
    from ..accelerators.base import Accelerator, DeviceInfo
    from ..config import TrainConfig


def launch_tracked(config: TrainConfig, adapter: Accelerator, device: DeviceInfo,
                   project_run_id: str | None) -> TrainResult:
    """devices > 1 without an outer launcher: create the run (or take `project_run_id`, MLFLOW_RUN_ID's), start
    the ranks, settle the run's status."""
    from mlflow.tracking import MlflowClient

    from ..launch.self_launch import launch_ranks
    from ..tracking.context import context_tags
    from ..tracking.runs import FAILED, FINISHED, KILLED, create_named_run, settle_run

    tags = {**context_tags(), **device_tags(device), RUN_KIND_TAG: RUN_KIND_TRAIN}
    run_id = run_to_resume(config, project_run_id) or create_named_run(
        config.experiment_name, run_name(config, device.kind), tags, project_run_id)
    client = MlflowClient()
    try:
        code = launch_ranks(adapter.launch_command(device, ["train", *to_cli_args(config)]), run_id)
    except Stopped as exc:
        settle_run(client, run_id, KILLED, first_line(exc))
        raise exc.at(run_id=run_id) from None
    except Exception as exc:  # the ranks could not start (no mpirun on PATH): the run must not stay RUNNING
        settle_run(client, run_id, FAILED, first_line(exc))
        raise
    settle_run(client, run_id, FINISHED if code == 0 else FAILED, f"a rank exited with status {code}")
    if code != 0:
        raise LaunchFailed(f"devices: {config.devices} ranks were launched and one failed (exit {code}); "
                           f"see the rank output above; run {run_id} is marked FAILED")
    return TrainResult(run_id, dict(client.get_run(run_id).data.metrics), target=config.target)
