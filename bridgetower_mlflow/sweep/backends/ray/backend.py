"""Cells as Ray tasks, one node per cell, on a cluster that already runs (a plain `ray start` will do).
Ray loads lazily."""

from __future__ import annotations

import logging
import signal
import time
from collections import deque
from dataclasses import dataclass

import click

from ....errors import ConfigError
from ...child import SweepContext, end_child
from ...grid import SweepCell
from . import checks
from .nodes import AFFINITY, NodePool, choose_placement
from .results import INTERRUPTED, NeverScheduled, child_result, find_child, task_fields
from .task import cell_job, installed_version, run_cell_task

CANCEL_GRACE_SECONDS = 15.0  # soft cancel: the task stops train's process tree and marks its run KILLED
WAIT_SECONDS = 1.0
RETRY_SECONDS = 3.0


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
    target, endpoint = checks.parse_ray_address(address)
    if endpoint:
        checks.probe(address, endpoint)
    # Ray Client's first connection to a fresh head can fail while the head starts its per-client server
    attempts = 2 if target.startswith("ray://") else 1
    for attempt in range(1, attempts + 1):
        try:
            ray.init(address=target, logging_level=logging.ERROR, log_to_driver=False)
            return True
        except (ConnectionError, ValueError) as exc:  # ValueError: e.g. ray:// without ray[client]
            if attempt == attempts or not isinstance(exc, ConnectionError):
                detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise ConfigError("ray_address", address, f"{checks.ADDRESS_FORMS} ({detail})") from None
            time.sleep(RETRY_SECONDS)
    return True  # not reached: the last attempt returns or raises


class RayBackend:
    """Runs each cell as a Ray task on a node of its own: by node affinity, or by the `bridgetower_host` slot."""

    name = "ray"

    def __init__(self, settings: RaySettings, tracking_uri: str):
        """Check and connect, before any run exists."""
        checks.check_tracking_uri(tracking_uri)
        self.version = installed_version()
        if self.version is None:
            raise ConfigError("backend", "ray", "allowed here: local; the ray backend checks every node against "
                                                "the driver's installed version: pip install -e . here first")
        self.ray = _import_ray()
        request = checks.cell_request(settings.accel_family, settings.devices)
        self.connected = _connect(self.ray, settings.address)
        try:
            nodes = [node for node in self.ray.nodes() if node.get("Alive")]
            checks.check_tracking_reach(tracking_uri, {node["NodeManagerAddress"] for node in nodes})
            checks.check_feasible(request, nodes, settings.address)
        except BaseException:
            self.close()
            raise
        self.placement = choose_placement(request, nodes, settings.exclusive_hosts)
        self.notes = list(self.placement.notes)

    def close(self) -> None:
        """Disconnect if this backend connected."""
        if self.connected:
            self.connected = False
            self.ray.shutdown()

    def run_cells(self, context: SweepContext, cells: list[SweepCell], report) -> None:
        """Start cells as nodes free up, report each as it ends; Ctrl-C cancels what runs and ends its runs KILLED."""
        task = self.ray.remote(run_cell_task)
        # In AFFINITY mode the driver holds back cells while every usable node runs one; else Ray queues them.
        pool = NodePool(self.placement.request, self.ray.nodes) if self.placement.mode == AFFINITY else None
        waiting = deque(cells)
        pending: dict[object, tuple[SweepCell, str | None]] = {}  # task ref -> (cell, the node it is pinned to)
        try:
            while waiting or pending:
                self._start_cells(task, context, waiting, pending, pool)
                if not pending and pool:  # nothing runs and no node takes a cell: every usable node is gone
                    for cell in waiting:
                        report(child_result(context, cell, {"reason": pool.describe_lost()}))
                    return
                ready, _ = self.ray.wait(list(pending), num_returns=1, timeout=WAIT_SECONDS)
                for ref in ready:
                    cell, node_id = pending.pop(ref)
                    try:
                        fields, node_gone = task_fields(self.ray, ref)
                    except NeverScheduled:
                        fields, node_gone = None, True
                        waiting.appendleft(cell)  # it never ran: no run, no log; it goes to a live node
                    if pool and node_id:
                        pool.release(node_id, node_gone)
                    if fields is not None:
                        report(child_result(context, cell, fields))
        except KeyboardInterrupt:
            self._cancel(context, {ref: cell for ref, (cell, _) in pending.items()})
            raise

    def _start_cells(self, task, context: SweepContext, waiting: deque, pending: dict, pool: NodePool | None) -> None:
        while waiting:
            node_id = pool.claim() if pool else None
            if pool and node_id is None:
                return  # every usable node holds a cell: the next one starts when one ends
            strategy = self._pin(node_id) if node_id else "SPREAD"
            cell = waiting.popleft()
            options = checks.task_options(self.placement.request, cell.run_name, strategy)
            pending[task.options(**options).remote(cell_job(context, cell, self.version))] = (cell, node_id)
            if node_id and context.on_start is not None:  # only a pinned cell has its node now: it starts at once
                context.on_start(cell)

    def _pin(self, node_id: str):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # soft=False: never elsewhere; a node gone before the task starts fails it (TaskUnschedulableError)
        return NodeAffinitySchedulingStrategy(node_id, soft=False)

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
