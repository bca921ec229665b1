"""Where each optimizer step's time goes, on the device's own clock where it has one.

The trainer marks points of every step (the clock's markers: host instants, or device events recorded on the
stream); the step's period is cut at those points into phases. Markers are read back once the clock has them
(`StepClock.ready` asks without waiting): the step loop gains no host synchronization. The intervals partition
the step, so the phases sum to its period; the idle gaps before each micro-batch's input are split into the
loader wait the host saw (data_wait, at most the gap) and the rest (other).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...accelerators.base import BACKWARD_END, FORWARD_END, GRADS_READY, INPUT_END, INPUT_START, STEP_END
from ...contract import (
    PHASE_ALL_REDUCE,
    PHASE_BACKWARD,
    PHASE_DATA_WAIT,
    PHASE_FORWARD,
    PHASE_FORWARD_BACKWARD,
    PHASE_HOST_TO_DEVICE,
    PHASE_OPTIMIZER,
    PHASE_OTHER,
)

if TYPE_CHECKING:
    from ...accelerators.base import PhaseTiming

# the points of a micro-batch, in order, each closing the phase named beside it (step_end closes the step)

GAP = "gap"  # the device waits for the host before a micro-batch's input
CLOSES = {INPUT_START: GAP, INPUT_END: PHASE_HOST_TO_DEVICE, FORWARD_END: PHASE_FORWARD, GRADS_READY: PHASE_BACKWARD,
          BACKWARD_END: PHASE_ALL_REDUCE, STEP_END: PHASE_OPTIMIZER}
ORDER = (GAP, PHASE_HOST_TO_DEVICE, PHASE_FORWARD, PHASE_BACKWARD, PHASE_ALL_REDUCE, PHASE_OPTIMIZER)


@dataclass(frozen=True)
class StepPhases:
    """One optimizer step: its period, its phases (seconds, summing to the period), its samples on this rank,
    and whether it opened an epoch (the Trainer began a new pass over its loader just before it)."""

    step: int
    seconds: float
    phases: dict[str, float]
    samples: int
    merged: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (merged phase, the phases it holds)
    epoch_start: bool = False


@dataclass
class _OpenStep:
    start: Any  # the previous step's end marker
    marks: list[tuple[str, Any]] = field(default_factory=list)


def merged_name(parts: tuple[str, ...]) -> str:
    """The name of an interval that holds several phases: forward_backward when it holds both, else its last."""
    return PHASE_FORWARD_BACKWARD if {PHASE_FORWARD, PHASE_BACKWARD} <= set(parts) else parts[-1]


def covered(previous: str | None, point: str, grads_ready_seen: bool) -> tuple[str, ...]:
    """The phases between the mark `previous` (None: the step's start) and the mark `point`."""
    if point == INPUT_START:
        return (GAP,)
    end = CLOSES[point] if point != BACKWARD_END or grads_ready_seen else PHASE_BACKWARD
    if previous is None or previous == BACKWARD_END and point != STEP_END:
        first = 0  # a new micro-batch without its input start marked
    else:
        first = ORDER.index(CLOSES[previous]) + 1 if previous != INPUT_START else 1
    parts = ORDER[first:ORDER.index(end) + 1]
    return tuple(p for p in parts if p != PHASE_ALL_REDUCE or grads_ready_seen) or (end,)


def split_step(durations: list[tuple[str, float]], host_wait: float
               ) -> tuple[dict[str, float], list[tuple[str, tuple[str, ...]]]]:
    """Phases of one step from (mark, seconds since the previous mark) in order: {phase: seconds}, merges seen."""
    phases: dict[str, float] = {}
    merges: list[tuple[str, tuple[str, ...]]] = []
    previous: str | None = None
    grads_ready_seen = False
    for point, seconds in durations:
        if point == INPUT_START:
            grads_ready_seen = False
        grads_ready_seen = grads_ready_seen or point == GRADS_READY
        parts = covered(previous, point, grads_ready_seen)
        name = merged_name(parts) if len(parts) > 1 else parts[0]
        if len(parts) > 1 and (name, parts) not in merges:
            merges.append((name, parts))
        phases[name] = phases.get(name, 0.0) + seconds
        previous = point
    gap = phases.pop(GAP, 0.0)
    waited = min(gap, max(0.0, host_wait))
    return {PHASE_DATA_WAIT: waited, **phases, PHASE_OTHER: gap - waited}, merges


class PhaseRecorder:
    """Marks the points of each step on the device's clock; hands steps back once their markers are ready."""

    def __init__(self, timing: PhaseTiming) -> None:
        self.clock = timing.clock()
        self.unmarked = timing.unmarked
        self._open: _OpenStep | None = None
        self._pending: deque[tuple[int, _OpenStep, Any, float, int, bool]] = deque()

    @property
    def started(self) -> bool:
        return self._open is not None

    def begin(self) -> None:
        """Training starts: the first step's period starts here."""
        self._open = _OpenStep(self.clock.mark())

    def mark(self, point: str) -> None:
        if self._open is None or point in self.unmarked:
            return
        if point == GRADS_READY and self._open.marks and self._open.marks[-1][0] == GRADS_READY:
            self._open.marks[-1] = (point, self.clock.mark())  # a later gradient bucket: the last one counts
            return
        self._open.marks.append((point, self.clock.mark()))

    def end_step(self, step: int, host_wait: float, samples: int, epoch_start: bool = False) -> None:
        """The optimizer step `step` ended; `host_wait`: seconds the host waited for its batches."""
        if self._open is None:
            return
        end = self.clock.mark()
        self._pending.append((step, self._open, end, host_wait, samples, epoch_start))
        self._open = _OpenStep(end)

    def restart(self) -> None:
        """The next step's period starts now (what ran since the last step's end belongs to no step)."""
        if self._open is not None:
            self._open = _OpenStep(self.clock.mark())

    def ready_steps(self) -> list[StepPhases]:
        """The steps whose markers the clock has (oldest first), without waiting for the device."""
        done = []
        while self._pending and self.clock.ready(self._pending[0][2]):
            done.append(self._read(*self._pending.popleft()))
        return done

    def finish(self) -> list[StepPhases]:
        """Training ended: wait for the device once, then every step not read back yet."""
        if self._pending:
            self.clock.synchronize()
        return self.ready_steps()

    def _read(self, step: int, open_step: _OpenStep, end: Any, host_wait: float, samples: int,
              epoch_start: bool) -> StepPhases:
        durations, previous = [], open_step.start
        for point, marker in [*open_step.marks, (STEP_END, end)]:
            durations.append((point, self.clock.seconds(previous, marker)))
            previous = marker
        phases, merges = split_step(durations, host_wait)
        total = sum(seconds for _, seconds in durations)
        return StepPhases(step, total, phases, samples, tuple(merges), epoch_start)
