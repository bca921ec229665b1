"""`bridgetower-mlflow compare`: the click command (heavy imports happen inside it)."""

from __future__ import annotations

import click

from ..cli_support import CONTEXT, dual_option, reports_errors


@click.command("compare", context_settings=CONTEXT)
@dual_option("experiment_name", multiple=True,
             help="Experiment to read runs from (repeatable). Default: MLFLOW_EXPERIMENT_ID/NAME, else all.")
@dual_option("experiment_id", multiple=True, help="Experiment id(s), repeatable or comma-separated.")
@click.option("--filter", "filter_string", default="",
              help="Extra MLflow filter, e.g. \"params.model = 'large'\" (AND only).")
@click.option("--baseline", default="", help="Accelerator that speedups are relative to (default: a100 "
              "where present, else the first).")
@dual_option("allow_diff", default="", help="Comma list of config keys allowed to differ side by side, "
             "e.g. per_device_train_batch_size (differences are shown).")
@click.option("--reference", default="none", help="none | study: add the published BridgeTower numbers.")
@dual_option("output_dir", default="", help="Also write report.md/txt, speedups.csv/json, PNGs here.")
@click.option("--log-to-mlflow/--no-log", default=True, show_default=True,
              help="Log the outputs as artifacts of a `compare` run.")
@dual_option("parent_run_id", default="", help="Compare only children of this run and log on it (sweep).")
@reports_errors
def compare_command(**options):
    """Group train runs into identical configurations and report speedups across accelerators."""
    from .report import CompareOptions, run_compare

    outcome = run_compare(CompareOptions(
        experiment_names=tuple(n for n in options["experiment_name"] if n.strip()),
        experiment_ids=tuple(options["experiment_id"]),
        filter_string=options["filter_string"].strip(),
        baseline=options["baseline"] or None,
        allow_diff=options["allow_diff"],
        reference=options["reference"],
        output_dir=options["output_dir"] or None,
        log_to_mlflow=options["log_to_mlflow"],
        parent_run_id=options["parent_run_id"].strip(),
    ))
    click.echo(outcome.text)
    for path in outcome.files:
        click.echo(f"wrote {path}")
    if outcome.logged_run_id:
        click.echo(f"logged compare outputs on run {outcome.logged_run_id}")
    for link in outcome.links:
        click.echo(f"view: {link}")
