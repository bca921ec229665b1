"""Device energy over the measured window, from hardware counters only (never estimated from power).

Counters are the samplers that are also EnergyCounters (samplers/protocol.py: a cumulative `energy_joules()`):
NVML's and HLML's total energy, RAPL's package energy. The window is the throughput window: from the end of the
warmup steps to the end of training, the same instants on every accelerator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...samplers.protocol import EnergyCounter

log = logging.getLogger(__name__)


class EnergyWindow:
    """start() and stop() read every counter; joules() is the energy between them, or None with a reason."""

    def __init__(self, counters: Iterable[EnergyCounter], note: str = ""):
        self.counters, self.note = list(counters), note
        self._start: float | None = None
        self._end: float | None = None
        self._paused_at: float | None = None
        self._excluded = 0.0  # joules of the evaluations inside the window (not training's)
        if not self.counters and not self.note:
            self.note = "no hardware energy counter here (NVML, HLML or RAPL)"

    def _read(self) -> float | None:
        try:
            values = [counter.energy_joules() for counter in self.counters]
        except Exception as exc:  # noqa: BLE001 - a counter that fails makes the window unknown, not the run
            self.note = f"energy counter failed: {type(exc).__name__}: {exc}"
            return None
        known = [value for value in values if value is not None]
        if len(known) < len(values):
            self.note = "the device refused its energy counter (e.g. NVML before Volta, MIG)"
            return None
        return sum(known)

    def start(self) -> None:
        if self.counters and not self.note:
            self._start = self._read()

    def stop(self) -> None:
        if self._start is not None:
            self._end = self._read()

    def pause(self, paused: bool) -> None:
        """An evaluation inside the window starts (True) or ends (False): its joules are left out."""
        if self._start is None or self._end is not None:
            return
        if paused:
            self._paused_at = self._read()
            if self._paused_at is None:
                self._start = None  # unknown from here on; _read said why
        elif self._paused_at is not None:
            now = self._read()
            if now is None:
                self._start = None
            else:
                self._excluded += now - self._paused_at
            self._paused_at = None

    def joules(self) -> float | None:
        if self._start is None or self._end is None:
            if not self.note:
                self.note = "the measured window never started (no step after the warmup)"
            return None
        return self._end - self._start - self._excluded
