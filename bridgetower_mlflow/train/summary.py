"""What `train` prints when it ends: the run's status, its headline figures and where to open it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..contract import THROUGHPUT_METRIC, WAIT_METRIC
from ..tracking.links import runs_view_url

if TYPE_CHECKING:
    from .result import TrainResult


def print_run_summary(result: TrainResult) -> None:
    if not result.run_id:
        return
    from mlflow.tracking import MlflowClient

    if result.spill_left:  # the server is away: asking it would only add minutes of retries
        status, experiment_id, metrics = "not recorded yet: tracking server away", None, result.metrics
    else:
        run = MlflowClient().get_run(result.run_id)
        status, experiment_id, metrics = run.info.status, run.info.experiment_id, result.metrics or run.data.metrics
    click.echo(f"run {result.run_id} ({status}): "
               f"{metrics.get(THROUGHPUT_METRIC, float('nan')):.1f} samples/s, "
               f"dataloader wait {metrics.get(WAIT_METRIC, float('nan')):.1%}, "
               f"eval_recall_at_1 {metrics.get('eval_recall_at_1', float('nan')):.3f}")
    if result.model_version:
        click.echo(f"registered version {result.model_version}")
    if experiment_id is not None:
        url, hint = runs_view_url(experiment_id, result.run_id)
        click.echo(f"open it: {url}" + (f"  (first run: {hint})" if hint else ""))
