"""A whole sweep: parent run, children one by one, then compare logged on the parent."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..contract import NOTE_LIMIT, RUN_KIND_SWEEP, RUN_KIND_TAG
from ..errors import BridgeTowerMlflowError
from .backends.local import ChildResult, SweepContext, progress_line, run_child
from .grid import SweepPlan, parse_device_decode, parse_workers, plan_cells


@dataclass
class SweepOptions:
    accel: str = "cpu"
    workers: str = "0,1,2"
    device_decode: str = "false,true"
    repeats: int = 1
    baseline: str = ""
    experiment_name: str = ""
    passthrough: list[str] = field(default_factory=list)


@dataclass
class SweepOutcome:
    parent_run_id: str
    results: list[ChildResult]
    notes: list[str]
    compare_text: str = ""

    @property
    def failed(self) -> list[ChildResult]:
        return [r for r in self.results if r.status != "FINISHED"]


def plan_sweep(options: SweepOptions) -> SweepPlan:
    """Validate the grid and ask the accelerator adapter what it can do."""
    from ..accelerators.registry import get_accelerator
    from ..config import parse_int

    repeats = parse_int("repeats", options.repeats, 1)
    adapter = get_accelerator(options.accel)
    return plan_cells(options.accel.strip().lower(), parse_workers(options.workers),
                      parse_device_decode(options.device_decode), repeats, adapter.device_loader is not None)


def _experiment_id(client, name: str) -> str:
    if name:
        experiment = client.get_experiment_by_name(name)
        return experiment.experiment_id if experiment else client.create_experiment(name)
    return os.environ.get("MLFLOW_EXPERIMENT_ID") or "0"


def open_parent(client, options: SweepOptions, plan: SweepPlan) -> tuple[str, str, bool]:
    """(parent run id, experiment id, created here): `mlflow run`'s run, else a new sweep run."""
    tags = {
        RUN_KIND_TAG: RUN_KIND_SWEEP, "sweep.accel": options.accel, "sweep.workers": str(options.workers),
        "sweep.device_decode": str(options.device_decode), "sweep.repeats": str(options.repeats),
        "sweep.cells": str(len(plan.cells)),
    }
    run_id = os.environ.get("MLFLOW_RUN_ID")
    name = f"sweep {options.accel} w{options.workers.replace(',', '/')}"
    if run_id:
        experiment_id = client.get_run(run_id).info.experiment_id
        for key, value in {**tags, "mlflow.runName": name}.items():
            client.set_tag(run_id, key, value)
        return run_id, experiment_id, False
    experiment_id = _experiment_id(client, options.experiment_name)
    run = client.create_run(experiment_id, run_name=name, tags=tags)
    return run.info.run_id, experiment_id, True


def _record_notes(client, parent_id: str, outcome: SweepOutcome) -> None:
    finished = len(outcome.results) - len(outcome.failed)
    client.set_tag(parent_id, "sweep.finished", str(finished))
    client.set_tag(parent_id, "sweep.failed", str(len(outcome.failed)))
    notes = "\n".join(outcome.notes) or "no notes"
    client.set_tag(parent_id, "sweep.notes", notes[:NOTE_LIMIT])
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "sweep_notes.txt"
        path.write_text(notes + "\n", encoding="utf-8")
        client.log_artifact(parent_id, str(path), "sweep")


def _compare_children(client, parent_id: str, baseline: str, echo) -> str:
    from ..compare.report import CompareOptions, run_compare

    try:
        outcome = run_compare(CompareOptions(parent_run_id=parent_id, baseline=baseline or None), client)
    except BridgeTowerMlflowError as exc:
        echo(f"compare skipped: {exc}")
        return ""
    echo(outcome.text)
    for link in outcome.links:
        echo(f"view: {link}")
    return outcome.text


def _run_cells(context: SweepContext, plan: SweepPlan, outcome: SweepOutcome, echo) -> None:
    for index, cell in enumerate(plan.cells, 1):
        result = run_child(context, cell)
        outcome.results.append(result)
        if result.status != "FINISHED":
            outcome.notes.append(f"{cell.run_name} ({result.run_id}) ended {result.status}, "
                                 f"exit code {result.returncode}")
        echo(progress_line(index, len(plan.cells), result))


def run_sweep(options: SweepOptions, client=None, echo=print) -> SweepOutcome:
    """Plan, run every cell (failures recorded, sweep goes on), then compare on the parent."""
    import mlflow
    from mlflow import MlflowClient

    plan = plan_sweep(options)
    client = client or MlflowClient()
    parent_id, experiment_id, created = open_parent(client, options, plan)
    for note in plan.notes:
        echo(f"note: {note}")
    passthrough = list(options.passthrough)
    if options.experiment_name:
        passthrough += ["--experiment-name", options.experiment_name]
    tracking_uri = getattr(client, "tracking_uri", "") or mlflow.get_tracking_uri()
    context = SweepContext(client, experiment_id, parent_id, passthrough, tracking_uri)
    outcome = SweepOutcome(parent_id, [], list(plan.notes))
    try:
        _run_cells(context, plan, outcome, echo)
    except BaseException as exc:
        if created:
            client.set_terminated(parent_id, "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
        raise
    finally:
        _record_notes(client, parent_id, outcome)
    outcome.compare_text = _compare_children(client, parent_id, options.baseline, echo)
    if created:
        client.set_terminated(parent_id, "FAILED" if outcome.failed else "FINISHED")
    return outcome
