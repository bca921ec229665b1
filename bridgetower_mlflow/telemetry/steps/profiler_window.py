"""torch.profiler over the asked steps A-B: a Chrome/Perfetto trace (gzipped) and the 15 ops with the most self
device time (self CPU time where the profiler records no device).

The profiler is started when step A-1 ends and stopped when step B ends, on a schedule whose active steps are
exactly A..B; each step is a `train_step_<n>` range in the trace. The trace is written after training ends.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ...contract import PROFILE_STEP_LABEL, PROFILE_TOP_OPS, PROFILE_TRACE_FILE

log = logging.getLogger(__name__)


class ProfilerWindow:
    """One torch.profiler window over the global steps first..last."""

    def __init__(self, first: int, last: int, activities: list[Any]) -> None:
        self.first, self.last, self.activities = first, last, activities
        self._profiler: Any = None
        self._label: Any = None
        self.done = False  # the schedule saved the last asked step

    @property
    def device_time(self) -> bool:
        """Whether the profiler records a device (else the table ranks ops by self CPU time)."""
        return any(activity.name != "CPU" for activity in self.activities)

    def start(self) -> None:
        """Step first-1 ended: record from here."""
        import torch

        steps = self.last - self.first + 1
        self._profiler = torch.profiler.profile(
            activities=self.activities, on_trace_ready=self._saved,
            schedule=torch.profiler.schedule(wait=0, warmup=0, active=steps, repeat=1))
        self._profiler.start()
        self._enter(self.first)

    def step_done(self, step: int) -> None:
        """Global step `step` (first..last) ended."""
        if self._profiler is None or self.done:
            return
        self._exit()
        self._profiler.step()
        if step < self.last and not self.done:
            self._enter(step + 1)

    def stop(self) -> None:
        """Training ended before the last asked step: keep what was recorded."""
        if self._profiler is not None and not self.done:
            self._exit()
            self._profiler.stop()
            self.done = True

    def _saved(self, profiler: Any) -> None:
        self.done = True

    def _enter(self, step: int) -> None:
        import torch

        self._label = torch.autograd.profiler.record_function(f"{PROFILE_STEP_LABEL}{step}")
        self._label.__enter__()

    def _exit(self) -> None:
        if self._label is not None:
            self._label.__exit__(None, None, None)
            self._label = None

    def export(self, folder: Path) -> tuple[Path, dict[str, list[Any]]] | None:
        """(the gzipped trace written into `folder`, the top-ops table) once the window ran; None otherwise."""
        if self._profiler is None or not self.done:
            return None
        folder.mkdir(parents=True, exist_ok=True)
        trace = folder / PROFILE_TRACE_FILE
        self._profiler.export_chrome_trace(str(trace))  # torch gzips a path ending in .gz
        return trace, top_ops(self._profiler.key_averages(), self.device_time)


def top_ops(averages: Any, device_time: bool, count: int = PROFILE_TOP_OPS) -> dict[str, list[Any]]:
    """The `count` ops with the most self device time (self CPU time without a device), as table columns."""
    key = "self_device_time_total" if device_time else "self_cpu_time_total"
    ranked = sorted(averages, key=lambda event: getattr(event, key), reverse=True)[:count]
    time_column = "self_device_ms" if device_time else "self_cpu_ms"
    return {
        "op": [event.key for event in ranked],
        "calls": [int(event.count) for event in ranked],
        time_column: [getattr(event, key) / 1000.0 for event in ranked],  # the profiler counts microseconds
        "cpu_total_ms": [event.cpu_time_total / 1000.0 for event in ranked],
    }
