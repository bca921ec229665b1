"""`bridgetower-mlflow train`: one option per TrainConfig field (heavy imports happen only when it runs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import TrainConfig
    from ..launch.signals import Stopped

import sys
from pathlib import Path

import click

from ..cli_support import CONTEXT, dual_option, reports_errors, setup_logging
from ..config import SCHEMA, build_train_config
from ..contract import ERROR_TAG_LIMIT
from ..errors import ResumeRefused, TrackingError
from ..flag_owners import CARRIER, owned_flags_help
from ..redact import first_line


def train_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--a-b` and `--a_b` for every field (mlflow run appends undeclared -P values as `--a_b`)."""
    for spec in reversed(SCHEMA):
        owned = f". {owned_flags_help(SCHEMA)}" if spec.name == CARRIER else ""
        command = dual_option(spec.name, default=None,
                              help=f"{spec.metadata['help']} (default: {spec.default!r}){owned}")(command)
    return dual_option("mediapipe_dataloader", default=None, help="alias of --device-decode (optimum-habana's name)")(
        command)


@click.command("train", context_settings=CONTEXT)
@train_options
@reports_errors
def train_command(**options: Any) -> None:
    """One fully tracked fine-tuning run on one accelerator kind."""
    config = build_train_config(**options)
    from ..environment import read_run_environment, self_launched

    environment = read_run_environment()  # every variable the run reads, checked before anything starts
    setup_logging()
    from ..launch.signals import Stopped, stop_signals_raise
    from .flow import train
    from .summary import print_run_summary

    with stop_signals_raise():
        try:
            result = train(config, environment=environment)
        except Stopped as exc:
            click.echo(f"error: {stopped_line(config, exc)}", err=True)
            sys.exit(exc.exit_code)
        except ResumeRefused as exc:
            if not exc.run_id or exc.run_id != environment.project_run_id:
                raise  # the refusal fails only `mlflow run`'s own run of this attempt, as any bad input does
            # MLFLOW_RUN_ID is the run the resume refused: it stays exactly as it was, not marked FAILED
            click.echo(f"error: {first_line(exc, ERROR_TAG_LIMIT)}", err=True)
            sys.exit(exc.exit_code)
    if not self_launched():  # the launcher prints for its ranks
        print_run_summary(result)
    if result.spill_left:
        raise TrackingError(f"tracking: the run trained, but {result.spill_left} records (metrics, tags, its end "
                            f"status) could not reach the tracking server; record them with: bridgetower-mlflow "
                            f"upload-spill {result.spill_file}")


def stopped_line(config: TrainConfig, exc: Stopped) -> str:
    """`train: stopped by SIGTERM at step 12; run abc is KILLED; resume with: bridgetower-mlflow train ...`."""
    from .checkpoints.resume import has_complete_checkpoint, resume_hint

    at = f" at step {exc.step}" if exc.step is not None else ""
    run_id = getattr(exc, "run_id", None)
    run = f"; run {run_id} is KILLED" if run_id else ""
    folder = str(Path(config.output_dir) / run_id) if run_id else config.output_dir
    return f"train: {exc}{at}{run}; {resume_hint(config, has_complete_checkpoint(folder))}"
