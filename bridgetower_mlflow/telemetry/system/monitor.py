"""One thread that polls every sampler each interval and ships `system/` metrics through a sink.

Samplers return bare names; the monitor adds `system/` once (and, where the job spans several nodes,
`system/node_<n>/` for each node's host series: SeriesNames). A failing sampler is a warning and
the others go on (telemetry fails soft). On a resumed run the series continue after their last step.
The thread is named `system-monitor` where the kernel shows it, at training's priority (thread_names.py says why).
A sample that comes more than two intervals after the previous one is late: one warning says how late, and
the run carries the count and the largest gap (`system/monitor_late_samples`, `system/monitor_max_gap_seconds`),
so a starved monitor shows as a figure instead of a silent hole in the series.
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...contract import MONITOR_LATE_SAMPLES, MONITOR_MAX_GAP, SYSTEM_PREFIX
from ...samplers.protocol import Sampler
from .thread_names import name_this_thread

if TYPE_CHECKING:
    from ..sinks import MetricSink

log = logging.getLogger(__name__)


NODE_SERIES = ("cpu_utilization_percentage", "system_memory_usage_megabytes", "system_memory_usage_percentage",
               "dataloader_workers_cpu_percentage", "dataloader_workers_count", MONITOR_LATE_SAMPLES, MONITOR_MAX_GAP)
LATE_AFTER_INTERVALS = 2  # a sample later than this many intervals after the previous one is late
JOB_SERIES = ("dataloader_workers_cpu_percentage", "dataloader_workers_count")  # the whole job's: every node's sum


@dataclass(frozen=True)
class SeriesNames:
    """The keys a bare sample name is logged as. One host runs the job (node None): `system/<name>`. Else
    `system/node_<n>/<name>` for the node's host series; rank 0's monitor (`main`) also logs its host's other
    series as `system/<name>`, but not JOB_SERIES: those cover every node, so they are summed at the end."""

    node: int | None = None
    main: bool = True

    def keys(self, name: str) -> tuple[str, ...]:
        if self.node is None:
            return (SYSTEM_PREFIX + name,)
        keys = (f"{SYSTEM_PREFIX}node_{self.node}/{name}",) if name in NODE_SERIES else ()
        return keys + ((SYSTEM_PREFIX + name,) if self.main and name not in JOB_SERIES else ())

    @property
    def kept(self) -> tuple[str, ...]:
        """Names whose samples the monitor keeps, to be summed over the nodes."""
        return () if self.node is None else JOB_SERIES


def resume_step(last_steps: Mapping[str, int]) -> int:
    """The step after the highest one any `system/` series already has (0 on a new run)."""
    steps = [step for key, step in last_steps.items() if key.startswith(SYSTEM_PREFIX)]
    return max(steps, default=-1) + 1


def sum_by_step(per_node) -> list[tuple[int, int, dict[str, float]]]:
    """Kept samples of several nodes [(step, ms, {name: value})...], each name summed over the nodes at the first
    node's samples: every other node adds its sample nearest in time, where its samples span that moment. Nodes
    start seconds apart, so the same step number is not the same moment."""
    if not per_node:
        return []
    others = [sorted(samples, key=lambda sample: sample[1]) for samples in per_node[1:]]
    times = [[sample[1] for sample in samples] for samples in others]
    summed = []
    for step, timestamp, values in per_node[0]:
        if not all(samples and samples[0][1] <= timestamp <= samples[-1][1] for samples in others):
            continue
        moment = [values] + [_nearest(samples, at, timestamp)[2] for samples, at in zip(others, times)]
        names = set.intersection(*(set(found) for found in moment))
        summed.append((step, timestamp, {name: sum(found[name] for found in moment) for name in sorted(names)}))
    return summed


def _nearest(samples, times: list[int], timestamp: int):
    """The sample nearest `timestamp` in samples sorted by time, `times` theirs (a long run has tens of thousands)."""
    after = bisect.bisect_left(times, timestamp)
    near = samples[max(after - 1, 0):after + 1]
    return min(near, key=lambda sample: abs(sample[1] - timestamp))


class Lateness:
    """How late the monitor's samples came: each gap over LATE_AFTER_INTERVALS intervals is one warning."""

    def __init__(self, interval: float) -> None:
        self.interval, self.late, self.max_gap = interval, 0, 0.0
        self.began = False
        self._previous = 0.0

    def begin(self) -> None:
        self._previous, self.began = time.monotonic(), True

    def sampled(self) -> bool:
        """Note a sample now; True when it was late."""
        now = time.monotonic()
        gap, self._previous = now - self._previous, now
        self.max_gap = max(self.max_gap, gap)
        if gap <= LATE_AFTER_INTERVALS * self.interval:
            return False
        self.late += 1
        log.warning("system metrics: this sample came %.1f s after the previous one (interval %.1f s): the monitor "
                    "thread was held up, so the system/ series have a hole there (%d late so far)",
                    gap, self.interval, self.late)
        return True

    def figures(self) -> dict[str, float]:
        return {MONITOR_LATE_SAMPLES: float(self.late), MONITOR_MAX_GAP: round(self.max_gap, 3)}


class SystemMonitor:
    """Every `interval` s: {system/<name>: value} from every sampler, one step per sample."""

    def __init__(self, sink: MetricSink, samplers: Iterable[Sampler], interval: float = 2.0,
                 last_steps: Mapping[str, int] | None = None, names: SeriesNames | None = None,
                 first_step: int | None = None):
        self.sink, self.samplers, self.interval = sink, list(samplers), interval
        self.names = names or SeriesNames()
        self.step = resume_step(last_steps or {}) if first_step is None else first_step
        self.kept: list[tuple[int, int, dict[str, float]]] = []  # (step, ms, {name: value}) of names.kept
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="system-monitor", daemon=True)
        self._warned: set[str] = set()
        self._sums: dict[str, list[float]] = {}  # bare name -> [total, count], for the run's advice
        self.lateness = Lateness(interval)

    def start(self) -> SystemMonitor:
        for sampler in self.samplers:
            sampler.start()
        self._thread.start()
        return self

    def sample_once(self) -> dict[str, float]:
        """{bare name: value} of every sampler that answered."""
        values = {}
        for sampler in self.samplers:
            try:
                values.update(sampler.sample())
            except Exception as exc:  # noqa: BLE001 - a broken sensor must not stop training
                name = type(sampler).__name__
                if name not in self._warned:
                    log.warning("system metrics: %s failed (%s: %s); the others go on", name, type(exc).__name__, exc)
                    self._warned.add(name)
        return values

    def _loop(self) -> None:
        name_this_thread()
        self.lateness.begin()
        while not self._stop.wait(self.interval):
            values = self.sample_once()
            if self.lateness.sampled():
                values.update(self.lateness.figures())
            if not values:
                continue
            self._log(values, int(time.time() * 1000))

    def _log(self, values: Mapping[str, float], timestamp: int) -> None:
        for name, value in values.items():
            for key in self.names.keys(name):
                self.sink.log_metric(key, value, self.step, timestamp)
            total = self._sums.setdefault(name, [0.0, 0])
            total[0], total[1] = total[0] + value, total[1] + 1
        kept = {name: values[name] for name in self.names.kept if name in values}
        if kept:
            self.kept.append((self.step, timestamp, kept))
        self.step += 1

    def mean(self, pattern: str) -> float | None:
        """Mean over the run of every series whose bare name matches `pattern` (None when never sampled)."""
        totals = [t for name, t in self._sums.items() if re.fullmatch(pattern, name)]
        count = sum(t[1] for t in totals)
        return sum(t[0] for t in totals) / count if count else None

    def stop(self) -> None:
        """Stop sampling; the run keeps the monitor's lateness figures (zeros when it was never late)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if not self._thread.is_alive() and self.lateness.began:
            self._log(self.lateness.figures(), int(time.time() * 1000))
        for sampler in self.samplers:
            try:
                sampler.stop()
            except Exception:  # noqa: BLE001 - closing a sensor must never fail a run
                pass
