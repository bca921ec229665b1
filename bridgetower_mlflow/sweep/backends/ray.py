"""Cells as Ray tasks, one node per cell, on a cluster that already runs (`ray start`). Ray loads lazily."""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass, replace

import click

from ...contract import HOST_NAME_TAG, PARENT_RUN_TAG, RAY_NODE_ID_TAG
from ...errors import ConfigError
from ..child import CELL_TAG, REPEAT_TAG, ChildResult, SweepContext, create_child, end_child
from ..grid import SweepCell
from . import ray_checks
from .ray_task import cell_job, installed_version, run_cell_task

CANCEL_GRACE_SECONDS = 15.0  # soft cancel: the task stops train's process tree and marks its run KILLED
WAIT_SECONDS = 1.0
RETRY_SECONDS = 3.0
INTERRUPTED = "cancelled: the sweep was interrupted"


@dataclass(frozen=True)
class RaySettings:
    address: str = "auto"
    accel_family: str = "cpu"
    devices: int = 1
    exclusive_hosts: bool = True


def _import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("backend", "ray", "allowed here: local; the ray backend needs the `ray` extra "
                                            "(pip install -e '.[ray]')") from None
    return ray


def _connect(ray, address: str) -> bool:
    """ray.init unless this process is already connected; True when this call connected."""
    if ray.is_initialized():
        return False
    target, endpoint = ray_checks.parse_ray_address(address)
    if endpoint:
        ray_checks.probe(address, endpoint)
    # Ray Client's first connection to a fresh head can fail while the head starts its per-client server
    attempts = 2 if target.startswith("ray://") else 1
    for attempt in range(1, attempts + 1):
        try:
            ray.init(address=target, logging_level=logging.ERROR, log_to_driver=False)
            return True
        except (ConnectionError, ValueError) as exc:  # ValueError: e.g. ray:// without ray[client]
            if attempt == attempts or not isinstance(exc, ConnectionError):
                detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise ConfigError("ray_address", address, f"{ray_checks.ADDRESS_FORMS} ({detail})") from None
            time.sleep(RETRY_SECONDS)
    return True  # not reached: the last attempt returns or raises


class RayBackend:
    """Submits every cell at once; Ray runs as many as the cluster has free nodes for."""

    name = "ray"

    def __init__(self, settings: RaySettings, tracking_uri: str):
        """Check and connect, before any run exists."""
        ray_checks.check_tracking_uri(tracking_uri)
        self.version = installed_version()
        if self.version is None:
            raise ConfigError("backend", "ray", "allowed here: local; the ray backend checks every node against "
                                                "the driver's installed version: pip install -e . here first")
        self.ray = _import_ray()
        self.request = ray_checks.cell_request(settings.accel_family, settings.devices, settings.exclusive_hosts)
        self.notes = [] if settings.exclusive_hosts else [
            "exclusive hosts off: cells may share a node, and its CPU cores, with other cells"]
        self.connected = _connect(self.ray, settings.address)
        try:
            nodes = [node for node in self.ray.nodes() if node.get("Alive")]
            ray_checks.check_tracking_reach(tracking_uri, {node["NodeManagerAddress"] for node in nodes})
            ray_checks.check_feasible(self.request, nodes, settings.address)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Disconnect if this backend connected."""
        if self.connected:
            self.connected = False
            self.ray.shutdown()

    def run_cells(self, context: SweepContext, cells: list[SweepCell], report) -> None:
        """Submit all cells, report each as it ends; Ctrl-C cancels what is left and ends its runs KILLED."""
        task = self.ray.remote(run_cell_task)
        pending = {}
        for cell in cells:
            options = ray_checks.task_options(self.request, cell.run_name)
            pending[task.options(**options).remote(cell_job(context, cell, self.version))] = cell
        try:
            while pending:
                ready, _ = self.ray.wait(list(pending), num_returns=1, timeout=WAIT_SECONDS)
                for ref in ready:
                    report(self._result(context, pending.pop(ref), ref))
        except KeyboardInterrupt:
            self._cancel(context, pending)
            raise

    def _result(self, context: SweepContext, cell: SweepCell, ref) -> ChildResult:
        exceptions = self.ray.exceptions
        try:
            fields = self.ray.get(ref)
        except exceptions.TaskCancelledError:
            fields = {"reason": INTERRUPTED, "status": "KILLED"}
        except exceptions.RayError as exc:
            fields = {"reason": failure_reason(exc)}
        node = f"{fields['host']}/{fields['node_id'][:12]}" if fields.get("node_id") else ""
        if fields.get("run_id"):  # the task ran train and ended its run itself
            return ChildResult(cell, fields["run_id"], fields["status"], fields["returncode"],
                               fields["samples_per_second"], fields["reason"], tuple(fields["tail"]), node)
        status = fields.get("status", "FAILED")
        run_id = find_child(context, cell)
        if run_id is None and status == "KILLED":
            return ChildResult(cell, "", status, None, reason=fields["reason"])  # never started: no run
        if run_id is None:  # failed before train could create its run: the failure still gets one
            run_id = create_child(replace(context, child_tags=_node_tags(fields)), cell)
        run = end_child(context.client, run_id, status, fields["reason"])
        return ChildResult(cell, run_id, run.info.status, None, reason=fields["reason"], node=node)

    def _cancel(self, context: SweepContext, pending: dict) -> None:
        # a second Ctrl-C (or SIGTERM) must not strand RUNNING runs: this cleanup is bounded
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            click.echo(f"interrupted: cancelling {len(pending)} cells (up to {CANCEL_GRACE_SECONDS:.0f} s)",
                       err=True)
            for ref in pending:
                self.ray.cancel(ref, force=False)  # KeyboardInterrupt inside the task: its `finally` stops train
            _, left = self.ray.wait(list(pending), num_returns=len(pending), timeout=CANCEL_GRACE_SECONDS)
            for ref in left:
                self.ray.cancel(ref, force=True)
            for cell in pending.values():
                run_id = find_child(context, cell)
                if run_id:
                    end_child(context.client, run_id, "KILLED", INTERRUPTED)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _node_tags(fields: dict) -> dict:
    if not fields.get("node_id"):
        return {}
    return {HOST_NAME_TAG: fields["host"], RAY_NODE_ID_TAG: fields["node_id"]}


def find_child(context: SweepContext, cell: SweepCell) -> str | None:
    """The child run a node created for `cell`, if it got that far."""
    query = (f"tags.`{PARENT_RUN_TAG}` = '{context.parent_run_id}' AND tags.`{CELL_TAG}` = '{cell.setting}' "
             f"AND tags.`{REPEAT_TAG}` = '{cell.repeat}'")
    runs = context.client.search_runs([context.experiment_id], query, max_results=1)
    return runs[0].info.run_id if runs else None


def failure_reason(exc: Exception) -> str:
    """One line on why a cell's task did not come back: lost node, dead worker, or the task's own error."""
    import ray.exceptions as errors

    first = (str(exc).strip().splitlines() or [""])[0][:300]
    if isinstance(exc, errors.NodeDiedError):
        return f"the Ray node running the cell was lost (NodeDiedError: {first})"
    if isinstance(exc, errors.WorkerCrashedError):
        return "the Ray worker running the cell died (WorkerCrashedError)"
    if isinstance(exc, errors.OutOfMemoryError):
        return "Ray's memory monitor killed the cell (OutOfMemoryError)"
    cause = getattr(exc, "cause", None)
    if cause is not None:
        detail = (str(cause).strip().splitlines() or [""])[0][:300]
        return f"the cell's Ray task failed on its node: {type(cause).__name__}: {detail}"
    return f"the cell's Ray task failed: {type(exc).__name__}: {first}"
