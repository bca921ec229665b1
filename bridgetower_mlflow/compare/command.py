"""`bridgetower-mlflow compare`: the click command (heavy imports happen inside it)."""

from __future__ import annotations

import sys

import click

from ..errors import BridgeTowerMlflowError


@click.command("compare")
@click.option("--experiment-name", "--experiment_name", "experiment_names", multiple=True,
              help="Experiment to read runs from (repeatable). Default: MLFLOW_EXPERIMENT_ID/NAME, else all.")
@click.option("--experiment-id", "--experiment_id", "experiment_ids", multiple=True,
              help="Experiment id(s), repeatable or comma-separated.")
@click.option("--filter", "filter_string", default="",
              help="Extra MLflow filter, e.g. \"params.model = 'large'\" (AND only).")
@click.option("--baseline", default="", help="Accelerator that speedups are relative to (default: a100 "
              "where present, else the first).")
@click.option("--allow-diff", "--allow_diff", "allow_diff", default="", help="Comma list of config keys allowed to differ side by side, "
              "e.g. per_device_train_batch_size (differences are shown).")
@click.option("--reference", default="none", help="none | study: add the published BridgeTower numbers.")
@click.option("--output-dir", "--output_dir", "output_dir", default="", help="Also write report.md/txt, speedups.csv/json, PNGs here.")
@click.option("--log-to-mlflow/--no-log", default=True, show_default=True,
              help="Log the outputs as artifacts of a `compare` run.")
@click.option("--parent-run-id", "--parent_run_id", "parent_run_id", default="", help="Compare only children of this run and log on it (sweep).")
def compare_command(experiment_names, experiment_ids, filter_string, baseline, allow_diff, reference,
                    output_dir, log_to_mlflow, parent_run_id):
    """Group train runs into identical configurations and report speedups across accelerators."""
    from .report import CompareOptions, run_compare

    options = CompareOptions(
        experiment_names=tuple(n for n in experiment_names if n.strip()),
        experiment_ids=tuple(experiment_ids),
        filter_string=filter_string.strip(),
        baseline=baseline or None,
        allow_diff=allow_diff,
        reference=reference,
        output_dir=output_dir or None,
        log_to_mlflow=log_to_mlflow,
        parent_run_id=parent_run_id.strip(),
    )
    try:
        outcome = run_compare(options)
    except BridgeTowerMlflowError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(outcome.text)
    for path in outcome.files:
        click.echo(f"wrote {path}")
    if outcome.logged_run_id:
        click.echo(f"logged compare outputs on run {outcome.logged_run_id}")
    for link in outcome.links:
        click.echo(f"view: {link}")
