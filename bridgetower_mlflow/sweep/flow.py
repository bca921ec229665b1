"""A whole sweep: parent run, children on a backend (here one by one, or on Ray), then compare on the parent."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..config import check_train_args
from ..contract import NOTE_LIMIT, RUN_KIND_SWEEP, RUN_KIND_TAG, RUN_NAME_TAG
from ..disk_space import writing
from ..environment import experiment_from_environment, project_run_id
from ..errors import BridgeTowerMlflowError, ConfigError
from ..launch.signals import stop_signals_raise
from ..redact import first_line
from ..tracking.runs import FAILED, FINISHED, KILLED, create_run, settle_run
from ..tracking.store_init import ready_store
from .backends.local import LocalBackend
from .child import ChildResult, SweepContext, print_failure, progress_line, start_line
from .grid import (
    Capabilities,
    SweepAxes,
    SweepCell,
    SweepPlan,
    parse_batches,
    parse_device_decode,
    parse_devices,
    parse_strategies,
    parse_workers,
    plan_cells,
)
from .limits import check_cells_can_measure, cpu_devices_note, device_capacity
from .quality import QualitySettings, parse_quality_settings, with_seeds

BACKENDS = ("local", "ray")


@dataclass
class SweepOptions:
    accel: str = "cpu"
    workers: str = "0,1,2"
    device_decode: str = "false,true"
    distribution_strategy: str = "ddp"
    per_device_train_batch_size: str = ""  # empty: train's default
    devices: str = ""  # empty: train's default (one device)
    repeats: int = 3
    baseline: str = ""
    experiment_name: str = ""
    passthrough: list[str] = field(default_factory=list)
    backend: str = "local"
    ray_address: str = "auto"
    exclusive_hosts: str = "true"
    target: str = ""  # the time-to-quality options every cell gets; empty: train's default
    eval_steps: str = ""
    stop_at_target: str = ""
    seed: str = ""  # the first repeat's seed (each repeat its own with a target)


@dataclass
class SweepOutcome:
    parent_run_id: str
    results: list[ChildResult]
    notes: list[str]
    compare_text: str = ""

    @property
    def failed(self) -> list[ChildResult]:
        return [r for r in self.results if r.status != "FINISHED"]


def adapter_strategies(adapter) -> tuple[str, ...]:
    """The distribution strategies the adapter can train with (its recipe still checks the installed stack)."""
    return tuple(adapter.distribution_strategies)


def plan_sweep(options: SweepOptions) -> SweepPlan:
    """Validate the grid and ask the accelerator adapter what it can do (this host's devices: local backend)."""
    from ..accelerators.registry import family, get_accelerator
    from ..config import parse_int
    from ..contract import CPU_FAMILY

    axes = SweepAxes(parse_workers(options.workers), parse_device_decode(options.device_decode),
                     parse_int("repeats", options.repeats, 1), parse_strategies(options.distribution_strategy),
                     parse_batches(options.per_device_train_batch_size), parse_devices(options.devices))
    check_cells_can_measure(list(options.passthrough))
    check_train_args([*options.passthrough, "--experiment-name", options.experiment_name])  # as every cell would
    accel, adapter = options.accel.strip().lower(), get_accelerator(options.accel)
    on_cpu = family(accel) == CPU_FAMILY
    local = str(options.backend).strip().lower() == "local"  # Ray's nodes, not this host, hold the devices
    limit, why = device_capacity(adapter, on_cpu, axes.devices) if local else (None, "")
    decodes = adapter.device_decode_loader_name is not None
    plan = plan_cells(accel, axes, Capabilities(decodes, adapter_strategies(adapter), limit, why))
    note = cpu_devices_note(accel, axes.devices) if on_cpu else ""
    return SweepPlan(with_seeds(plan.cells, quality_settings(options)), plan.notes + ([note] if note else []))


def quality_settings(options: SweepOptions) -> QualitySettings:
    return parse_quality_settings(options.target, options.eval_steps, options.stop_at_target, options.seed)


def cell_devices(plan: SweepPlan) -> int:
    """The devices a Ray cell holds: the largest cell's (with exclusive hosts each has its node alone anyway)."""
    return max((cell.devices or 1) for cell in plan.cells)


def open_backend(options: SweepOptions, tracking_uri: str, plan: SweepPlan):
    """The backend that runs the cells; Ray's checks its cluster and the tracking store now, before any run."""
    from ..config import parse_bool

    backend = str(options.backend).strip().lower()
    if backend not in BACKENDS:
        raise ConfigError("backend", options.backend, "allowed: " + ", ".join(BACKENDS))
    exclusive = parse_bool("exclusive_hosts", options.exclusive_hosts)
    if backend == "local":
        return LocalBackend()
    from ..accelerators.registry import family
    from .backends.ray import RayBackend, RaySettings
    settings = RaySettings(options.ray_address, family(options.accel), cell_devices(plan), exclusive)
    return RayBackend(settings, tracking_uri)


def _experiment_id(client, name: str) -> str:
    if name:
        experiment = client.get_experiment_by_name(name)
        return experiment.experiment_id if experiment else client.create_experiment(name)
    return experiment_from_environment()[1] or "0"


def open_parent(client, options: SweepOptions, plan: SweepPlan, backend: str) -> tuple[str, str, bool]:
    """(parent run id, experiment id, created here): `mlflow run`'s run, else a new sweep run."""
    tags = {
        RUN_KIND_TAG: RUN_KIND_SWEEP, "sweep.accel": options.accel, "sweep.workers": str(options.workers),
        "sweep.device_decode": str(options.device_decode), "sweep.repeats": str(options.repeats),
        "sweep.distribution_strategy": ",".join(parse_strategies(options.distribution_strategy)),
        "sweep.per_device_train_batch_size": ",".join(
            str(b) for b in parse_batches(options.per_device_train_batch_size) if b is not None) or "default",
        "sweep.cells": str(len(plan.cells)), "sweep.backend": backend,
        "sweep.devices": ",".join(str(n) for n in parse_devices(options.devices) if n is not None) or "default",
        **quality_settings(options).tags(),
    }
    ready_store()  # two sweeps (or a sweep and a train) starting on a fresh sqlite store
    run_id = project_run_id()
    name = f"sweep {options.accel} w{options.workers.replace(',', '/')}"
    if run_id:
        experiment_id = client.get_run(run_id).info.experiment_id
        for key, value in {**tags, RUN_NAME_TAG: name}.items():
            client.set_tag(run_id, key, value)
        return run_id, experiment_id, False
    experiment_id = _experiment_id(client, options.experiment_name)
    return create_run(client, experiment_id, name, tags), experiment_id, True


def _record_notes(client, parent_id: str, outcome: SweepOutcome) -> None:
    finished = len(outcome.results) - len(outcome.failed)
    client.set_tag(parent_id, "sweep.finished", str(finished))
    client.set_tag(parent_id, "sweep.failed", str(len(outcome.failed)))
    notes = "\n".join(outcome.notes) or "no notes"
    client.set_tag(parent_id, "sweep.notes", notes[:NOTE_LIMIT])
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "sweep_notes.txt"
        with writing("TMPDIR", "the sweep's notes", scratch):
            path.write_text(notes + "\n", encoding="utf-8")
        artifacts = str(client.get_run(parent_id).info.artifact_uri).removeprefix("file://")
        with writing("tracking", "the sweep's notes", artifacts):
            client.log_artifact(parent_id, str(path), "sweep")


def _compare_children(client, parent_id: str, baseline: str, echo) -> str:
    from ..compare.flow import CompareOptions, run_compare

    try:
        outcome = run_compare(CompareOptions(parent_run_id=parent_id, baseline=baseline or None), client)
    except BridgeTowerMlflowError as exc:
        echo(f"compare skipped: {exc}")
        return ""
    echo(outcome.text)
    for link in outcome.links:
        echo(f"view: {link}")
    return outcome.text


def _reporter(outcome: SweepOutcome, total: int, echo):
    """Called once per ended cell, in the order cells end."""

    def report(result: ChildResult) -> None:
        outcome.results.append(result)
        if result.status != "FINISHED":
            reason = result.reason or f"exit code {result.returncode}"
            run = result.run_id or "no run"
            outcome.notes.append(f"{result.cell.run_name} ({run}) ended {result.status}: {reason}")
            print_failure(result)
        echo(progress_line(len(outcome.results), total, result))

    return report


def _starter(total: int, echo):
    """Called once per cell as its train process starts (local backend), in the order cells start."""
    started = 0

    def start(cell: SweepCell) -> None:
        nonlocal started
        started += 1
        echo(start_line(started, total, cell))

    return start


def _run_cells(backend, context: SweepContext, plan: SweepPlan, outcome: SweepOutcome, echo) -> None:
    try:
        with stop_signals_raise():  # `kill`, `timeout`, `mlflow run`'s cancel: ended as Ctrl-C ends it
            backend.run_cells(context, plan.cells, _reporter(outcome, len(plan.cells), echo))
    finally:
        _record_notes(context.client, context.parent_run_id, outcome)


def run_sweep(options: SweepOptions, client=None, echo=print) -> SweepOutcome:
    """Plan, run every cell (failures recorded, sweep goes on), then compare on the parent."""
    import mlflow
    from mlflow import MlflowClient

    plan = plan_sweep(options)
    tracking_uri = getattr(client, "tracking_uri", "") or mlflow.get_tracking_uri()
    backend = open_backend(options, tracking_uri, plan)  # before the client: it may create a sqlite store
    client = client or MlflowClient(tracking_uri)
    try:
        parent_id, experiment_id, created = open_parent(client, options, plan, backend.name)
        notes = [*plan.notes, *backend.notes]
        for note in notes:
            echo(f"note: {note}")
        passthrough = list(options.passthrough) + quality_settings(options).train_args()
        if options.experiment_name:
            passthrough += ["--experiment-name", options.experiment_name]
        context = SweepContext(client, experiment_id, parent_id, passthrough, tracking_uri,
                               on_start=_starter(len(plan.cells), echo))
        outcome = SweepOutcome(parent_id, [], notes)
        try:
            _run_cells(backend, context, plan, outcome, echo)
        except BaseException as exc:
            if created:
                interrupted = isinstance(exc, KeyboardInterrupt)
                settle_run(client, parent_id, KILLED if interrupted else FAILED,
                           "interrupted" if interrupted else first_line(exc))
            raise
    finally:
        backend.close()
    outcome.compare_text = _compare_children(client, parent_id, options.baseline, echo)
    if created:
        settle_run(client, parent_id, FAILED if outcome.failed else FINISHED,
                   f"{len(outcome.failed)} cell(s) failed" if outcome.failed else "")
    return outcome
