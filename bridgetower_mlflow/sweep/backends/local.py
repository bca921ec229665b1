"""Runs each grid cell as `train` in its own process, resuming a pre-created child run."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ...contract import PARENT_RUN_TAG, RUN_KIND_TAG, RUN_KIND_TRAIN, RUN_NAME_TAG
from ..grid import SweepCell

TRAIN_CMD_ENV = "BRIDGETOWER_TRAIN_CMD"  # replaces `python -m bridgetower_mlflow train` (tests)
LOG_TAIL_LINES = 15


@dataclass
class ChildResult:
    cell: SweepCell
    run_id: str
    status: str
    returncode: int
    samples_per_second: float | None = None


@dataclass
class SweepContext:
    """Where children go and what every child gets."""

    client: object
    experiment_id: str
    parent_run_id: str
    passthrough: list[str] = field(default_factory=list)
    tracking_uri: str = ""


def train_command() -> list[str]:
    override = os.environ.get(TRAIN_CMD_ENV, "").strip()
    return shlex.split(override) if override else [sys.executable, "-m", "bridgetower_mlflow", "train"]


def _child_env(context: SweepContext, run_id: str) -> dict:
    env = dict(os.environ)
    env.pop("MLFLOW_EXPERIMENT_NAME", None)  # the child run already fixes the experiment
    env.update(MLFLOW_RUN_ID=run_id, MLFLOW_EXPERIMENT_ID=context.experiment_id)
    if context.tracking_uri:
        env["MLFLOW_TRACKING_URI"] = context.tracking_uri
    return env


def create_child(context: SweepContext, cell: SweepCell) -> str:
    tags = {
        PARENT_RUN_TAG: context.parent_run_id, RUN_NAME_TAG: cell.run_name,
        RUN_KIND_TAG: RUN_KIND_TRAIN, "sweep.cell": cell.setting, "sweep.repeat": str(cell.repeat),
    }
    return context.client.create_run(context.experiment_id, tags=tags, run_name=cell.run_name).info.run_id


def run_child(context: SweepContext, cell: SweepCell) -> ChildResult:
    """Create the child run, run train in a subprocess, and make sure the run ends honestly."""
    client = context.client
    run_id = create_child(context, cell)
    command = [*train_command(), *cell.train_args(), *context.passthrough]
    with tempfile.TemporaryDirectory(prefix="bridgetower-sweep-") as scratch:
        log_path = Path(scratch) / "train_output.log"
        with open(log_path, "wb") as log:
            try:
                returncode = subprocess.call(command, env=_child_env(context, run_id),
                                             stdout=log, stderr=subprocess.STDOUT)
            except KeyboardInterrupt:
                client.set_terminated(run_id, "KILLED")
                raise
            except OSError as exc:
                log.write(f"could not start {command[0]!r}: {exc}\n".encode())
                returncode = 127
        run = client.get_run(run_id)
        if run.info.status == "RUNNING":
            # train died before ending its run; nobody else will end it
            client.set_terminated(run_id, "FAILED")
        _attach_log(client, run_id, log_path)
        if returncode != 0:
            _print_tail(cell, log_path, returncode)
    run = client.get_run(run_id)
    throughput = run.data.metrics.get("train_samples_per_second")
    return ChildResult(cell, run_id, run.info.status, returncode, throughput)


def _attach_log(client, run_id: str, log_path: Path) -> None:
    try:
        client.log_artifact(run_id, str(log_path), "sweep")
    except Exception as exc:  # noqa: BLE001 - an artifact-store hiccup must not stop the sweep
        print(f"warning: could not log the train output of {run_id}: {exc}", file=sys.stderr)


def _print_tail(cell: SweepCell, log_path: Path, returncode: int) -> None:
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]
    print(f"  {cell.run_name} exited with {returncode}; last lines of its output:", file=sys.stderr)
    for line in lines:
        print(f"    {line}", file=sys.stderr)


def progress_line(index: int, total: int, result: ChildResult) -> str:
    """`[2/6] cpu w1 decode=cpu r1: 123.4 samples/s (FINISHED), 4 left`."""
    value = f"{result.samples_per_second:.1f} samples/s" if result.samples_per_second is not None else "no throughput"
    return f"[{index}/{total}] {result.cell.run_name}: {value} ({result.status}), {total - index} left"
