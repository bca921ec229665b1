"""The phases of a rank's measured window, the figures they give, and the steps kept out of the window.

A window is the throughput window (the steps after the warmup) less the profiler's steps. Ranks combine like
throughput: the figures are the slowest rank's window (measure.py picks it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...contract import (
    phase_fraction_metric,
    phase_seconds_metric,
    step_phase_fraction_metric,
    step_phase_seconds_metric,
)
from .phases import StepPhases
from .step_spread import epoch_start_cost, step_spread

if TYPE_CHECKING:
    from .throughput import RankThroughput

Merge = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class LeftOut:
    """Steps kept out of the throughput window (the profiled ones): their count, samples, host seconds and wait."""

    steps: int = 0
    samples: int = 0
    seconds: float = 0.0
    wait_seconds: float = 0.0


@dataclass(frozen=True)
class RankPhases:
    """One rank's window: step count, the steps' periods, phase totals (seconds), what was merged, what was left
    out, and which steps opened an epoch (in the order of step_seconds)."""

    steps: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    step_seconds: tuple[float, ...] = ()
    merged: tuple[Merge, ...] = ()
    left_out: LeftOut = LeftOut()
    epoch_starts: tuple[bool, ...] = ()

    @property
    def seconds(self) -> float:
        return sum(self.step_seconds)


class PhaseWindow:
    """Adds up the steps of a window as they are read back."""

    def __init__(self) -> None:
        self._steps: list[StepPhases] = []

    def add(self, step: StepPhases) -> None:
        self._steps.append(step)

    def result(self, left_out: LeftOut) -> RankPhases:
        merged: list[Merge] = []
        for step in self._steps:
            merged += [merge for merge in step.merged if merge not in merged]
        return RankPhases(len(self._steps), totals(self._steps), tuple(s.seconds for s in self._steps),
                          tuple(merged), left_out, tuple(s.epoch_start for s in self._steps))


def totals(steps: Sequence[StepPhases]) -> dict[str, float]:
    """Seconds per phase over `steps`, in the order the phases first appear."""
    out: dict[str, float] = {}
    for step in steps:
        for phase, seconds in step.phases.items():
            out[phase] = out.get(phase, 0.0) + seconds
    return out


def window_figures(window: RankPhases) -> dict[str, float]:
    """train_phase_<phase>_seconds_per_step and _fraction (summing to 1), the step-time spread and what an
    epoch's first step cost beyond the others."""
    seconds = window.seconds
    if not window.steps or seconds <= 0:
        return {}
    figures = {}
    for phase, total in window.phases.items():
        figures[phase_seconds_metric(phase)] = total / window.steps
        figures[phase_fraction_metric(phase)] = total / seconds
    return {**figures, **step_spread(window.step_seconds), **epoch_start_cost(window.step_seconds, window.epoch_starts)}


def interval_figures(steps: Sequence[StepPhases]) -> dict[str, float]:
    """step_phase_<phase>_seconds_per_step and _fraction over one logging interval's steps."""
    seconds = sum(step.seconds for step in steps)
    if not steps or seconds <= 0:
        return {}
    figures = {}
    for phase, total in totals(steps).items():
        figures[step_phase_seconds_metric(phase)] = total / len(steps)
        figures[step_phase_fraction_metric(phase)] = total / seconds
    return figures


def slowest(windows: Sequence[Any]) -> int:
    """The index of the rank whose throughput window was the longest (the one the run's figures come from)."""
    return max(range(len(windows)), key=lambda index: windows[index].seconds)


def leave_out(window: RankThroughput, left: LeftOut) -> RankThroughput:
    """A rank's throughput window without the steps in `left` (the same figures, the profiled steps taken out)."""
    if not left.steps or window.steps <= left.steps:
        return window
    return dataclasses.replace(window, steps=window.steps - left.steps, samples=window.samples - left.samples,
                               seconds=window.seconds - left.seconds,
                               wait_seconds=window.wait_seconds - left.wait_seconds)
