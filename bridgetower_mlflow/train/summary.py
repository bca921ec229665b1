"""What `train` prints when it ends: the run's status, its headline figures and where to open it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..contract import (
    ADVICE_TAG,
    EPOCH_START_EXTRA_FRACTION_METRIC,
    EPOCH_START_EXTRA_SECONDS_METRIC,
    EPOCH_START_SHARE,
    PHASE_FORWARD_BACKWARD,
    PHASES,
    STEP_SECONDS_P50_METRIC,
    STEP_SECONDS_P90_METRIC,
    THROUGHPUT_METRIC,
    WAIT_METRIC,
    phase_fraction_metric,
)
from ..tracking.links import runs_view_url
from .record import target_line

if TYPE_CHECKING:
    from .result import TrainResult


def print_run_summary(result: TrainResult) -> None:
    if not result.run_id:
        return
    from mlflow.tracking import MlflowClient

    if result.spill_left:  # the server is away: asking it would only add minutes of retries
        status, experiment_id, metrics = "not recorded yet: tracking server away", None, result.metrics
        advice = ""
    else:
        run = MlflowClient().get_run(result.run_id)
        status, experiment_id, metrics = run.info.status, run.info.experiment_id, result.metrics or run.data.metrics
        advice = run.data.tags.get(ADVICE_TAG, "")
    target = result.target
    click.echo(f"run {result.run_id} ({status}): "
               f"{metrics.get(THROUGHPUT_METRIC, float('nan')):.1f} samples/s, "
               f"dataloader wait {metrics.get(WAIT_METRIC, float('nan')):.1%}, "
               f"eval_recall_at_1 {metrics.get('eval_recall_at_1', float('nan')):.3f}")
    where = step_line(metrics)
    if where:
        click.echo(where)
    if target:
        click.echo(target_line(target, metrics))
    if advice:
        click.echo(f"advice: {advice}")
    if result.model_version:
        click.echo(f"registered version {result.model_version}")
    if experiment_id is not None:
        url, hint = runs_view_url(experiment_id, result.run_id)
        click.echo(f"open it: {url}" + (f"  (first run: {hint})" if hint else ""))


def step_line(metrics: dict[str, float]) -> str:
    """`where a step went: backward 51%, forward 41%, ... (step p50 0.61 s, p90 0.98 s)`, and what an epoch's
    first step cost beyond the others where that is a tenth of the window; "" without a breakdown."""
    shares = sorted(((metrics[phase_fraction_metric(phase)], phase) for phase in (*PHASES, PHASE_FORWARD_BACKWARD)
                     if phase_fraction_metric(phase) in metrics), reverse=True)
    if not shares:
        return ""
    notes = ([f"step p50 {metrics[STEP_SECONDS_P50_METRIC]:.3g} s, p90 {metrics[STEP_SECONDS_P90_METRIC]:.3g} s"]
             if STEP_SECONDS_P50_METRIC in metrics and STEP_SECONDS_P90_METRIC in metrics else [])
    epoch_start = metrics.get(EPOCH_START_EXTRA_FRACTION_METRIC, 0.0)
    if epoch_start >= EPOCH_START_SHARE:
        notes.append(f"an epoch's first step +{metrics[EPOCH_START_EXTRA_SECONDS_METRIC]:.2f} s, "
                     f"{epoch_start:.0%} of the window")
    spread = f" ({'; '.join(notes)})" if notes else ""
    return "where a step went: " + ", ".join(f"{phase} {share:.0%}" for share, phase in shares) + spread
