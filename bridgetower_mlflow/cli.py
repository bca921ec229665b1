"""`bridgetower-mlflow`: options -> config; project errors -> one line and an exit status. No logic."""

from __future__ import annotations

import functools
import logging
import os
import sys

import click

from .config import TrainConfig, build_train_config
from .errors import BridgeTowerMlflowError

TRAIN_OPTIONS = [name for name in TrainConfig.__dataclass_fields__]


def _mark_project_run_failed(message: str) -> None:
    """A run `mlflow run` created must not stay RUNNING when we fail before our own session."""
    run_id = os.environ.get("MLFLOW_RUN_ID")
    if not run_id or os.environ.get("RANK", "0") != "0":
        return
    try:
        from mlflow.tracking import MlflowClient

        from .tracking.params import redact_text

        client = MlflowClient()
        if client.get_run(run_id).info.status == "RUNNING":
            client.set_tag(run_id, "error", redact_text(message)[:500])
            client.set_terminated(run_id, "FAILED")
    except Exception:  # noqa: BLE001 - the tracking server may be the problem; mlflow run marks it too
        pass


def reports_errors(command):
    """Project errors become `error: <one line>` on stderr and the error's exit status."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except BridgeTowerMlflowError as exc:
            message = str(exc).splitlines()[0]
            _mark_project_run_failed(message)
            click.echo(f"error: {message}", err=True)
            sys.exit(exc.exit_code)

    return wrapper


def _setup_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("bridgetower_mlflow").setLevel(logging.INFO)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


def train_options(command):
    """One option per TrainConfig field; `--a-b` and `--a_b` both work (mlflow run appends `--a_b`)."""
    for name in reversed(TRAIN_OPTIONS):
        dashed = name.replace("_", "-")
        names = [f"--{dashed}"] + ([f"--{name}"] if dashed != name else [])
        command = click.option(*names, name, default=None, help=f"default: {getattr(TrainConfig(), name)!r}")(command)
    return click.option("--mediapipe-dataloader", "--mediapipe_dataloader", "mediapipe_dataloader", default=None,
                        help="alias of --device-decode (optimum-habana's name)")(command)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
def main():
    """BridgeTower fine-tuning benchmark, tracked in MLflow (Gaudi, NVIDIA, CPU)."""


@main.command("train")
@train_options
@reports_errors
def train_command(**options):
    """One fully tracked fine-tuning run on one accelerator kind."""
    config = build_train_config(**options)
    _setup_logging()
    from .training import train
    from .tracking.links import print_run_summary

    result = train(config)
    if os.environ.get("BRIDGETOWER_LAUNCHED") != "1":  # the launcher prints for its ranks
        print_run_summary(result)


@main.command("sample-data")
@click.option("--output", default=None, help="folder (default: the cache folder dataset=sample uses; "
              "a bigger --train-size there makes dataset=sample bigger)")
@click.option("--train-size", default=240, show_default=True, type=click.IntRange(2))
@click.option("--validation-size", default=48, show_default=True, type=click.IntRange(2))
@click.option("--test-size", default=48, show_default=True, type=click.IntRange(1))
@click.option("--seed", default=0, show_default=True, type=int)
def sample_data_command(output, train_size, validation_size, test_size, seed):
    """Generate the sample set (New Yorker `matching` schema) in imagefolder layout."""
    from pathlib import Path

    from .data.sample import generate_sample_set

    sizes = {"train": train_size, "validation": validation_size, "test": test_size}
    folder = generate_sample_set(Path(output) if output else None, sizes, seed)
    click.echo(f"sample set: {folder} ({train_size}/{validation_size}/{test_size} rows)")


@main.command("upload-spill")
@click.argument("spill_file", type=click.Path(exists=True, dir_okay=False))
@reports_errors
def upload_spill_command(spill_file):
    """Send metrics a run could not deliver (tracking server away) to MLFLOW_TRACKING_URI."""
    from .tracking.spill_upload import upload_spill

    sent, runs = upload_spill(spill_file)
    click.echo(f"uploaded {sent} metrics to {len(runs)} run(s): {', '.join(sorted(runs))}")


def _add_subpackage_commands() -> None:
    """compare, sweep and promote live in their own packages; their modules import nothing heavy."""
    from .compare.command import compare_command
    from .sweep.command import sweep_command
    from .tracking.promote_command import promote_command

    main.add_command(compare_command, "compare")
    main.add_command(sweep_command, "sweep")
    main.add_command(promote_command, "promote")


_add_subpackage_commands()
