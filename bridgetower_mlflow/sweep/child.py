"""The child-run library: each grid cell runs as `train` in its own process, resuming a child run created
just before it starts; every backend (local, Ray) uses it."""

from __future__ import annotations

import shlex
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..contract import (
    ERROR_TAG,
    PARENT_RUN_TAG,
    RUN_KIND_TAG,
    RUN_KIND_TRAIN,
    RUN_NAME_TAG,
    SWEEP_CELL_TAG,
    SWEEP_REPEAT_TAG,
    THROUGHPUT_METRIC,
)
from ..environment import (
    EXPERIMENT_ID_ENV,
    EXPERIMENT_NAME_ENV,
    PROJECT_RUN_ENV,
    SWEEP_CELL_ENV,
    TRACKING_URI_ENV,
    for_child_process,
    train_command_override,
)
from ..redact import first_line
from ..tracking.runs import create_run, settle_run
from .grid import SweepCell
from .process import exit_reason, run_train_process

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

LOG_TAIL_LINES = 15


@dataclass
class ChildResult:
    cell: SweepCell
    run_id: str
    status: str
    returncode: int | None
    samples_per_second: float | None = None
    reason: str = ""  # why it did not finish (also the child's `error` tag)
    tail: tuple = ()  # last lines of train's output when it failed
    node: str = ""  # where it ran, when that is not this machine


@dataclass
class SweepContext:
    """Where children go and what every child gets."""

    client: MlflowClient
    experiment_id: str
    parent_run_id: str
    passthrough: list[str] = field(default_factory=list)
    tracking_uri: str = ""
    child_tags: dict = field(default_factory=dict)  # extra tags on each child (the Ray node it ran on)
    env: dict | None = None  # train's base environment; None = this process's
    train_cmd: str = ""  # overrides TRAIN_CMD_ENV of this process
    workdir: str | None = None  # train's working directory; None = this process's
    on_start: Callable[[SweepCell], None] | None = None  # told as each cell's train process starts


def train_command(override: str = "") -> list[str]:
    text = (override or train_command_override()).strip()
    return shlex.split(text) if text else [sys.executable, "-m", "bridgetower_mlflow", "train"]


def _child_env(context: SweepContext, run_id: str) -> dict:
    env = dict(for_child_process() if context.env is None else context.env)
    env.pop(EXPERIMENT_NAME_ENV, None)  # the child run already fixes the experiment
    env.update({PROJECT_RUN_ENV: run_id, EXPERIMENT_ID_ENV: context.experiment_id, SWEEP_CELL_ENV: "1"})
    if context.tracking_uri:
        env[TRACKING_URI_ENV] = context.tracking_uri
    return env


def create_child(context: SweepContext, cell: SweepCell) -> str:
    tags = {
        PARENT_RUN_TAG: context.parent_run_id, RUN_NAME_TAG: cell.run_name, RUN_KIND_TAG: RUN_KIND_TRAIN,
        SWEEP_CELL_TAG: cell.setting, SWEEP_REPEAT_TAG: str(cell.repeat), **context.child_tags,
    }
    return create_run(context.client, context.experiment_id, cell.run_name, tags)


def end_child(client, run_id: str, status: str, reason: str = ""):
    """End a run its process left RUNNING; a failed run without an `error` tag gets `reason` as one."""
    return settle_run(client, run_id, status, reason)


def run_child(context: SweepContext, cell: SweepCell) -> ChildResult:
    """Create the child run, run train in a subprocess, and make sure the run ends honestly."""
    client = context.client
    run_id = create_child(context, cell)
    command = [*train_command(context.train_cmd), *cell.train_args(), *context.passthrough]
    with tempfile.TemporaryDirectory(prefix="bridgetower-sweep-") as scratch:
        log_path = Path(scratch) / "train_output.log"
        with open(log_path, "wb") as log:
            if context.on_start is not None:
                context.on_start(cell)
            try:
                returncode = run_train_process(command, _child_env(context, run_id), log, context.workdir)
            except KeyboardInterrupt:
                end_child(client, run_id, "KILLED", "cancelled: the sweep was interrupted")
                raise
            except OSError as exc:
                log.write(f"could not start {command[0]!r}: {exc}\n".encode())
                returncode = 127
        reason = exit_reason(returncode) if returncode else "train exited without ending its run"
        # train died before ending its run (or ended it without saying why): nobody else will
        run = end_child(client, run_id, "FAILED", reason)
        _attach_log(client, run_id, log_path)
        tail = tuple(_tail(log_path)) if returncode != 0 else ()
    throughput = run.data.metrics.get(THROUGHPUT_METRIC)
    status = run.info.status
    reason = "" if status == "FINISHED" else run.data.tags.get(ERROR_TAG) or reason  # train's own words first
    return ChildResult(cell, run_id, status, returncode, throughput, reason, tail)


def _attach_log(client, run_id: str, log_path: Path) -> None:
    try:
        client.log_artifact(run_id, str(log_path), "sweep")
    except Exception as exc:  # noqa: BLE001 - an artifact-store hiccup must not stop the sweep
        click.echo(f"warning: could not log the train output of {run_id}: {first_line(exc)}", err=True)


def _tail(log_path: Path) -> list[str]:
    return log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]


def print_failure(result: ChildResult) -> None:
    """The failed child's reason and the last lines of its output, on stderr."""
    where = f" on {result.node}" if result.node else ""
    click.echo(f"  {result.cell.run_name}{where}: {result.reason or result.status}", err=True)
    if result.tail:
        click.echo("  last lines of its output:", err=True)
    for line in result.tail:
        click.echo(f"    {line}", err=True)


def start_line(index: int, total: int, cell: SweepCell) -> str:
    """`[3/12] starting cpu w1 decode=cpu ddp b8 r1`."""
    return f"[{index}/{total}] starting {cell.run_name}"


def progress_line(index: int, total: int, result: ChildResult) -> str:
    """`[2/6] cpu w1 decode=cpu r1: 123.4 samples/s (FINISHED), 4 left`."""
    value = f"{result.samples_per_second:.1f} samples/s" if result.samples_per_second is not None else "no throughput"
    where = f" on {result.node}" if result.node else ""
    return f"[{index}/{total}] {result.cell.run_name}{where}: {value} ({result.status}), {total - index} left"
