"""`bridgetower-mlflow compare`: the click command (heavy imports happen inside it)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from ..cli_support import CONTEXT, dual_option, mark_project_run_failed, reports_errors

if TYPE_CHECKING:
    from .analysis.gate import GateResult


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
@click.option("--reference", default="none", help="none | study: the HF blog's 2023-08 table + optimum-habana's "
              "current Gaudi2 CI baseline | all: also the CI history, Gaudi3 CI, Intel's table, the blog's first "
              "version. Published rows are marked; no H200 number is published.")
@dual_option("output_dir", default="", help="Also write report.md/txt, speedups.csv/json, PNGs here.")
@click.option("--log-to-mlflow/--no-log", default=True, show_default=True,
              help="Log the outputs as artifacts of a `compare` run.")
@dual_option("parent_run_id", default="", help="Compare only children of this run and log on it (sweep).")
@click.option("--prices", default="", help="USD per device-hour you pay, e.g. gaudi2=1.20,h100=2.50,a100=1.10: "
              "adds USD per million samples (none are built in).")
@dual_option("price_source", default="", help="Where the prices come from, recorded with them, e.g. "
             "\"on-demand list prices, 2026-11, vendor X\".")
@dual_option("write_gate", default="", help="Write the measured samples/s per configuration and accelerator "
             "to this JSON file (a regression gate).")
@click.option("--gate", default="", help="Check against a --write-gate file: exit 1 and list the "
              "configurations below tolerance x the gate.")
@click.option("--tolerance", default="0.95", show_default=True,
              help="Gate rule (optimum-habana's CI): fail below tolerance x the gated samples/s.")
@dual_option("quality_tolerance", default="0.1", show_default=True,
             help="Gate rule for runs with a target: fail where the median final target metric is worse than the "
                  "gate's by more than this share, or the median samples to target grew by more.")
@reports_errors
def compare_command(**options: Any) -> None:
    """Group train runs into identical configurations and report speedups across accelerators."""
    from ..text_fields import folder, run_id
    from .flow import CompareOptions, run_compare

    outcome = run_compare(CompareOptions(
        experiment_names=tuple(n for n in options["experiment_name"] if n.strip()),
        experiment_ids=tuple(options["experiment_id"]),
        filter_string=options["filter_string"].strip(),
        baseline=options["baseline"] or None,
        allow_diff=options["allow_diff"],
        reference=options["reference"],
        output_dir=folder("output_dir", options["output_dir"]) if options["output_dir"].strip() else None,
        log_to_mlflow=options["log_to_mlflow"],
        parent_run_id=run_id("parent_run_id", options["parent_run_id"]),
        prices=options["prices"], price_source=options["price_source"],
        gate=options["gate"], write_gate=options["write_gate"], tolerance=options["tolerance"],
        quality_tolerance=options["quality_tolerance"],
    ))
    click.echo(outcome.text)
    for path in outcome.files:
        click.echo(f"wrote {path}")
    if outcome.logged_run_id:
        click.echo(f"logged compare outputs on run {outcome.logged_run_id}")
    for link in outcome.links:
        click.echo(f"view: {link}")
    if outcome.gate_file:
        click.echo(f"wrote gate {outcome.gate_file}")
    if outcome.gate and not outcome.gate.passed:
        _fail_gate(outcome.gate)


def _fail_gate(gate: GateResult) -> None:
    """The gate's verdict: its lines at the end of the log, one error line, exit status 1."""
    for line in gate.failed_lines():
        click.echo(line)
    message = gate.failure_message()
    mark_project_run_failed(message)
    click.echo(f"error: {message}", err=True)
    sys.exit(1)
