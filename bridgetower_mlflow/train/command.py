"""`bridgetower-mlflow train`: one option per TrainConfig field (heavy imports happen only when it runs)."""

from __future__ import annotations

import click

from ..cli_support import CONTEXT, dual_option, reports_errors, setup_logging
from ..config import SCHEMA, build_train_config
from ..errors import TrackingError


def train_options(command):
    """`--a-b` and `--a_b` for every field (mlflow run appends undeclared -P values as `--a_b`)."""
    for spec in reversed(SCHEMA):
        command = dual_option(spec.name, default=None,
                              help=f"{spec.metadata['help']} (default: {spec.default!r})")(command)
    return dual_option("mediapipe_dataloader", default=None, help="alias of --device-decode (optimum-habana's name)")(
        command)


@click.command("train", context_settings=CONTEXT)
@train_options
@reports_errors
def train_command(**options):
    """One fully tracked fine-tuning run on one accelerator kind."""
    config = build_train_config(**options)
    setup_logging()
    from ..launch.self_launch import was_self_launched
    from .flow import train
    from .summary import print_run_summary

    result = train(config)
    if not was_self_launched():  # the launcher prints for its ranks
        print_run_summary(result)
    if result.spill_left:
        raise TrackingError(f"tracking: the run trained, but {result.spill_left} records (metrics, tags, its end "
                            f"status) could not reach the tracking server; record them with: bridgetower-mlflow "
                            f"upload-spill {result.spill_file}")
