"""`bridgetower-mlflow sweep`: the click command (heavy imports happen inside it)."""

from __future__ import annotations

import sys

import click

from ..cli_support import CONTEXT, bool_option, dual_option, reports_errors

# train options a sweep passes through unchanged when given
PASSTHROUGH_OPTIONS = ("model", "dataset", "max_steps", "image_backend")


@click.command("sweep", context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--accel", default="cpu", show_default=True, help="Accelerator kind for every cell.")
@click.option("--workers", default="0,1,2", show_default=True, help="dataloader_num_workers values.")
@dual_option("device_decode", default="false,true", show_default=True,
             help="device_decode values; cells the accelerator cannot do are skipped with a note.")
@dual_option("distribution_strategy", default="ddp", show_default=True,
             help="distribution_strategy values (ddp, fast_ddp); fast_ddp cells are skipped with a note where "
                  "the accelerator has no fast_ddp.")
@dual_option("per_device_train_batch_size", default="",
             help="per_device_train_batch_size values, e.g. 8,16; empty: train's default.")
@click.option("--repeats", default="3", show_default=True, help="Runs per cell (median/min/max in compare).")
@click.option("--baseline", default="", help="Baseline accelerator for the final compare.")
@dual_option("experiment_name", default="", help="Experiment for the parent and children.")
@click.option("--model", default=None, help="Passed to train.")
@click.option("--dataset", default=None, help="Passed to train.")
@dual_option("max_steps", default=None, help="Passed to train.")
@dual_option("image_backend", default="", help="Passed to train when given (fast or study); empty: train's default.")
@click.option("--devices", default="", help="devices values (processes per cell), e.g. 1,2,4,8; empty: train's default "
              "(one). Cells needing more devices than this host has are skipped with a note; on cpu a device is a "
              "process over the host's cores. With --backend ray, each cell holds the largest count's devices.")
@dual_option("eval_steps", default="", help="Passed to every cell's train when given: evaluate every N optimizer "
             "steps; empty: train's default (once, at the end).")
@click.option("--target", default="", help="Passed to every cell's train when given, e.g. eval_recall_at_5>=0.20 "
              "(quote it in a shell); with a target each repeat gets its own seed (seed + repeat - 1), as MLPerf asks.")
@dual_option("stop_at_target", default="", help="Passed to every cell's train when given (true/false); empty: "
             "train's default (stop at the first evaluation that reaches the target).")
@click.option("--seed", default="", help="The seed of every cell (with a target: of each cell's first repeat); "
              "empty: train's default.")
@click.option("--backend", default="local", show_default=True,
              help="local: cells one after another here; ray: cells as Ray tasks, one node per cell.")
@dual_option("ray_address", default="auto", show_default=True,
             help="With --backend ray: auto (this machine's cluster, or RAY_ADDRESS), host:port or ray://host:port.")
@bool_option("exclusive_hosts", "With --backend ray: each cell holds its node alone, so no two cells share CPU "
                                "cores (by node affinity; by the `bridgetower_host` slot where nodes have one).",
             default="true")
@click.pass_context
@reports_errors
def sweep_command(ctx, **options):
    """Run the workers x device-decode x strategy x batch x devices x repeats grid as nested train runs, then compare.

    Any other `--key value` (or anything after `--`) is passed to every train run.
    """
    from .flow import SweepOptions, run_sweep

    passthrough = []
    for name in PASSTHROUGH_OPTIONS:
        if options.get(name) is not None and str(options[name]).strip():
            passthrough += [f"--{name.replace('_', '-')}", str(options[name]).strip()]
    sweep = SweepOptions(accel=options["accel"], workers=options["workers"], device_decode=options["device_decode"],
                         distribution_strategy=options["distribution_strategy"],
                         per_device_train_batch_size=options["per_device_train_batch_size"] or "",
                         devices=options["devices"] or "",
                         repeats=options["repeats"], baseline=options["baseline"],
                         experiment_name=options["experiment_name"].strip(), passthrough=passthrough + list(ctx.args),
                         backend=options["backend"], ray_address=options["ray_address"],
                         exclusive_hosts=options["exclusive_hosts"], target=options["target"],
                         eval_steps=options["eval_steps"], stop_at_target=options["stop_at_target"],
                         seed=options["seed"])
    outcome = run_sweep(sweep, echo=click.echo)
    done = len(outcome.results) - len(outcome.failed)
    click.echo(f"sweep {outcome.parent_run_id}: {done} of {len(outcome.results)} runs finished")
    if outcome.failed:
        sys.exit(1)
