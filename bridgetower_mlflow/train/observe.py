"""The observation of a run on every rank: the system monitors and the energy window while it trains
(telemetry/system/host_monitors.py builds them), read once into Observed when it ends. What the observation adds at the
end (FLOPs, TFLOP/s, MFU, energy, the advice line) is train/findings.py's, a pure function of Observed.

Rank 0 monitors its node; where the job spans several nodes, each other node's first rank monitors its own
host too and writes `system/node_<n>/...` into the same run through its own MetricBuffer (spilled and
replayed like rank 0's): no rank waits on another while it trains, and an outage of the tracking server
or of a slow node costs no other node anything. The job-wide data-loader worker series are summed over
the nodes once, at the end, in the main thread (gather_nodes, called by measure: one all_gather); rank 0's
close logs the sum."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from ..contract import SYSTEM_PREFIX
from ..environment import SystemMetricsSettings
from ..launch.collectives import all_gather_objects
from ..telemetry.system.host_monitors import Schedule, energy_window, start_device_monitor, start_node_monitor
from ..telemetry.system.monitor import SeriesNames, resume_step, sum_by_step

if TYPE_CHECKING:
    from ..launch.ranks import RankInfo
    from ..telemetry.steps.step_timing import PhaseReport
    from ..telemetry.system.energy import EnergyWindow
    from ..telemetry.system.monitor import SystemMonitor
    from ..tracking.metric_buffer import MetricBuffer
    from ..tracking.session import RunSession
    from .prepare import Prepared

Sample = tuple[int, int, dict[str, float]]  # (step, ms, {name: value})

log = logging.getLogger(__name__)
DEVICE_UTILIZATION = r"(gpu|hpu)_\d+_utilization_percentage"
WORKERS_CPU = "dataloader_workers_cpu_percentage"
NODE_FLUSH_TIMEOUT = 10.0  # a node's last samples at the end; what is not sent by then is in its spill file


@dataclass(frozen=True)
class Peer:
    """One rank, as every rank learns it when training starts (rank 0 adds the run and its first system step)."""

    rank: int
    node: int
    pid: int
    run_id: str | None = None
    first_step: int = 0


@dataclass(frozen=True)
class NodeReport:
    """What one node's monitor kept of the job-wide series: (step, ms, {name: value}), and the host's cores."""

    node: int
    cores: int
    samples: tuple[Sample, ...] = ()


@dataclass(frozen=True)
class Observed:
    """What rank 0's telemetry saw, read once when training ends: plain numbers, so findings are pure."""

    workers_cpu_percent: float | None = None  # the data-loader workers, summed (100 = one core)
    device_utilization: float | None = None  # mean percent, where the device reports it
    energy_joules: float | None = None  # over the throughput window
    energy_note: str = "no energy counter was read (system metrics were off)"
    whole_job: bool = True  # this host ran every rank
    node_report: NodeReport | None = None  # where several nodes ran the job: this node's, for rank 0 to sum
    host_cores: int | None = None  # of every node that ran the job (None: this host's)
    phases: PhaseReport | None = None  # how this rank timed the step's phases (every rank times them alike)


@contextlib.contextmanager
def observing(prepared: Prepared, session: RunSession | None, ranks: RankInfo,
              settings: SystemMetricsSettings) -> Iterator[Observation]:
    """The observation while its block trains; stopped however the block ends (`observed()` then reads it)."""
    observation = Observation(prepared, session, ranks, settings)
    try:
        yield observation
    finally:
        observation.stop()


class Observation:
    """Started before training on every rank (a collective: each learns its node's ranks); rank 0 and each other
    node's first rank monitor their host, unless system metrics are off. `stop` returns what was observed (and
    keeps it for `observed`)."""

    def __init__(self, prepared: Prepared, session: RunSession | None, ranks: RankInfo,
                 settings: SystemMetricsSettings) -> None:
        self.whole_job = ranks.whole_job_here
        self.monitor: SystemMonitor | None = None
        self.window: EnergyWindow | None = None
        self._node_sink: tuple[MetricBuffer, TextIO] | None = None
        run_id = getattr(session, "run_id", None)
        first = resume_step(session.last_steps) if session is not None else 0
        peers = all_gather_objects(Peer(ranks.rank, ranks.node_rank, os.getpid(), run_id, first), ranks)
        mine = [peer for peer in peers if peer.node == ranks.node_rank]
        pids = [peer.pid for peer in mine]
        if session is not None:
            names = SeriesNames() if self.whole_job else SeriesNames(ranks.node_rank)
            here = dataclasses.replace(prepared.device, count=ranks.devices_here(prepared.device.count))
            if settings.enabled:
                self.monitor = start_device_monitor(session.buffer, prepared.adapter, here, pids, names,
                                                    Schedule(first, settings.interval_s))
            self.window = energy_window(self.monitor)
        elif (settings.enabled and not self.whole_job and peers[0].run_id
              and ranks.rank == min(peer.rank for peer in mine)):
            self._node_sink = _node_sink(peers[0].run_id, ranks.node_rank)
            if self._node_sink:
                self.monitor = start_node_monitor(self._node_sink[0], ranks.node_rank, pids,
                                                  Schedule(peers[0].first_step, settings.interval_s))
        self.node = ranks.node_rank
        self._observed: Observed | None = None

    def observed(self) -> Observed:
        """What `stop` read."""
        if self._observed is None:
            raise RuntimeError("the observation is read before it stopped")
        return self._observed

    def stop(self) -> Observed:
        if self._observed is not None:
            return self._observed
        if self.monitor:
            self.monitor.stop()
        if self._node_sink:
            _close_node_sink(*self._node_sink)
        found = Observed(whole_job=self.whole_job)
        if self.monitor:
            found = dataclasses.replace(found, workers_cpu_percent=self.monitor.mean(WORKERS_CPU),
                                        device_utilization=self.monitor.mean(DEVICE_UTILIZATION))
            if not self.whole_job:
                report = NodeReport(self.node, os.cpu_count() or 1, tuple(self.monitor.kept))
                found = dataclasses.replace(found, node_report=report)
        if self.window:
            joules = self.window.joules()  # sets the window's note when it has none
            found = dataclasses.replace(found, energy_joules=joules, energy_note=self.window.note)
        self._observed = found
        return found


def gather_nodes(observed: Observed, ranks: RankInfo) -> tuple[Observed, tuple[Sample, ...]]:
    """Where several nodes ran the job: (the advice's worker CPU and cores over the whole job, every node's
    worker series summed at the moments every node sampled, for rank 0 to log as the job's
    `system/dataloader_workers_*`). A collective: every rank calls it, in the main thread."""
    if observed.whole_job or ranks.world_size == 1:
        return observed, ()
    reports = [report for report in all_gather_objects(observed.node_report, ranks) if report is not None]
    if not reports:
        return observed, ()
    summed = tuple(sum_by_step([report.samples for report in reports]))
    cpu = [values[WORKERS_CPU] for _, _, values in summed if WORKERS_CPU in values]
    return dataclasses.replace(observed, workers_cpu_percent=sum(cpu) / len(cpu) if cpu else None,
                               host_cores=sum(report.cores for report in reports)), summed


def system_series(summed: tuple[Sample, ...]) -> Iterator[tuple[str, float, int, int]]:
    """(key, value, step, ms) of the summed worker series, under `system/`."""
    for step, timestamp, values in summed:
        for name, value in values.items():
            yield SYSTEM_PREFIX + name, value, step, timestamp


def _node_sink(run_id: str, node: int) -> tuple[MetricBuffer, TextIO] | None:
    """(MetricBuffer of the run, its spill lock): this node's own, spilled where rank 0's would be."""
    from mlflow.tracking import MlflowClient

    from ..tracking.metric_buffer import MetricBuffer
    from ..tracking.session import spill_dir
    from ..tracking.spill import hold_spill_lock

    try:
        spill = spill_dir() / f"{run_id}.node_{node}.spill.jsonl"
        lock = hold_spill_lock(spill)
        return MetricBuffer(MlflowClient(), run_id, spill), lock
    except Exception as exc:  # noqa: BLE001 - telemetry fails soft
        log.warning("system metrics of node %d disabled: %s", node, exc)
        return None


def _close_node_sink(buffer: MetricBuffer, lock: TextIO) -> None:
    left = buffer.close(NODE_FLUSH_TIMEOUT)
    lock.close()
    if left:
        log.warning("%d system metrics of this node wait in %s (replayed by the next run here, or "
                    "`bridgetower-mlflow upload-spill`)", left, buffer.spill_path)
