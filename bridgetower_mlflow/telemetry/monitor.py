"""One thread that polls every sampler each interval and ships `system/` metrics through a sink.

Samplers return bare names; the monitor adds `system/` once. A failing sampler is a warning and
the others go on (telemetry fails soft). On a resumed run the series continue after their last step.
The thread runs at a lower priority than training, named `system-monitor` where the kernel shows it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping

from ..contract import SYSTEM_PREFIX
from .thread_priority import lower_this_thread_priority

log = logging.getLogger(__name__)


def resume_step(last_steps: Mapping[str, int]) -> int:
    """The step after the highest one any `system/` series already has (0 on a new run)."""
    steps = [step for key, step in last_steps.items() if key.startswith(SYSTEM_PREFIX)]
    return max(steps, default=-1) + 1


class SystemMonitor:
    """Every `interval` s: {system/<name>: value} from every sampler, one step per sample."""

    def __init__(self, sink, samplers, interval: float = 2.0, last_steps: Mapping[str, int] | None = None):
        self.sink, self.samplers, self.interval = sink, list(samplers), interval
        self.step = resume_step(last_steps or {})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="system-monitor", daemon=True)
        self._warned: set[str] = set()
        self._sums: dict[str, list[float]] = {}  # bare name -> [total, count], for the run's advice

    def start(self) -> SystemMonitor:
        for sampler in self.samplers:
            getattr(sampler, "start", lambda: None)()
        self._thread.start()
        return self

    def sample_once(self) -> dict[str, float]:
        values = {}
        for sampler in self.samplers:
            try:
                values.update({SYSTEM_PREFIX + key: value for key, value in sampler.sample().items()})
            except Exception as exc:  # noqa: BLE001 - a broken sensor must not stop training
                name = type(sampler).__name__
                if name not in self._warned:
                    log.warning("system metrics: %s failed (%s: %s); the others go on", name, type(exc).__name__, exc)
                    self._warned.add(name)
        return values

    def _loop(self) -> None:
        lower_this_thread_priority()  # a saturated host serves training first; samples only wait their turn
        while not self._stop.wait(self.interval):
            values = self.sample_once()
            if not values:
                continue
            timestamp = int(time.time() * 1000)
            for key, value in values.items():
                self.sink.log_metric(key, value, self.step, timestamp)
                total = self._sums.setdefault(key[len(SYSTEM_PREFIX):], [0.0, 0])
                total[0], total[1] = total[0] + value, total[1] + 1
            self.step += 1

    def mean(self, pattern: str) -> float | None:
        """Mean over the run of every series whose bare name matches `pattern` (None when never sampled)."""
        totals = [t for name, t in self._sums.items() if re.fullmatch(pattern, name)]
        count = sum(t[1] for t in totals)
        return sum(t[0] for t in totals) / count if count else None

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for sampler in self.samplers:
            try:
                sampler.close()
            except Exception:  # noqa: BLE001 - closing a sensor must never fail a run
                pass
