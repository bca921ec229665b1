"""The step-timing callback: ends each step's phase record, reads steps back late, logs the per-interval phase
series, keeps the window's phases, and runs the profiler window (whose steps stay out of every window).

It is the first of the project's callbacks, so the others' time at a step's end counts in the next step
(as `other`), and it never waits for the device: steps are read back when the clock has them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from ...errors import ConfigError
from .phase_window import LeftOut, PhaseWindow, RankPhases, interval_figures
from .phases import GRADS_READY, PhaseRecorder, StepPhases
from .profiler_window import ProfilerWindow

if TYPE_CHECKING:
    from ...accelerators.base import PhaseTiming
    from ..sinks import MetricSink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PhaseReport:
    """How the phases were timed, for the run's tags: the clock, what merged and why, what is absent and why."""

    timing: PhaseTiming | None
    merged: tuple[tuple[str, tuple[str, ...]], ...] = ()
    all_reduce: str = ""  # why the all-reduce was not timed ("" = it was, or the run has one device)
    error: str = ""  # why there is no breakdown at all


class StepTimingCallback(TrainerCallback):
    """Phases of every step on `timing`'s clock (None: none), the window's, and the profiler window `profile`
    (a ProfilerWindow on the rank that profiles, else the (first, last) steps every rank keeps out)."""

    def __init__(self, sink: MetricSink, timing: PhaseTiming | None, wait_seconds: Callable[[], float],
                 warmup_steps: int, logging_steps: int, profile: ProfilerWindow | tuple[int, int] | None = None):
        self.sink, self.timing, self.wait_seconds = sink, timing, wait_seconds
        self.recorder, self.error = _recorder(timing)
        self.all_reduce = timing.all_reduce if timing is not None else ""
        self.warmup_steps, self.logging_steps = warmup_steps, logging_steps
        self.profiler = profile if isinstance(profile, ProfilerWindow) else None
        self.profile_steps = (profile.first, profile.last) if isinstance(profile, ProfilerWindow) else profile
        self.start_step = 0
        self.window = PhaseWindow()
        self._interval: list[StepPhases] = []
        self._samples = 0  # this step's, so far
        self._wait = 0.0  # the loader wait at the previous step's end
        self._epoch_began = False  # the next step to end opens an epoch
        self._left_out = LeftOut()
        self._left_from: tuple[float, float] | None = None  # (time, wait) where the left-out steps began

    def add_samples(self, samples: int) -> None:
        """A micro-batch of `samples` rows entered the step (the trainer's input hook)."""
        self._samples += samples

    def mark(self, point: str) -> None:
        """The trainer reached `point` of the step (phases.POINTS)."""
        if self.recorder is not None:
            self.recorder.mark(point)

    def hook_all_reduce(self, model: Any) -> None:
        """The first training step's wrapped model: time DDP's gradient all-reduce where this device allows."""
        from .all_reduce_timing import time_all_reduce

        if self.recorder is not None and not self.all_reduce:
            self.all_reduce = time_all_reduce(model, lambda: self.mark(GRADS_READY))

    def report(self) -> PhaseReport:
        return PhaseReport(self.timing, self.window.result(LeftOut()).merged, self.all_reduce, self.error)

    def left_out(self, step: int) -> bool:
        return self.profile_steps is not None and self.profile_steps[0] <= step <= self.profile_steps[1]

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.start_step = state.global_step
        self._check_profile(state.max_steps)
        self._wait = self.wait_seconds()
        if self.recorder is not None:
            self.recorder.begin()
        if self.profile_steps and self.profile_steps[0] == self.start_step + 1:
            self._begin_left_out()

    def _check_profile(self, max_steps: int) -> None:
        """The window must lie after the warmup and end by the last step (epoch runs learn that count here)."""
        if not self.profile_steps:
            return
        first, last = self.profile_steps
        if last > max_steps > 0:
            raise ConfigError("profile_steps", f"{first}-{last}", f"allowed: steps within the run's {max_steps}")
        if first <= self.start_step + self.warmup_steps:  # a resume past (or into) the window: nothing to profile
            log.warning("profile_steps %d-%d: the run resumed at step %d (warmup to %d); no profile taken",
                        first, last, self.start_step, self.start_step + self.warmup_steps)
            self.profiler, self.profile_steps = None, None

    def _begin_left_out(self) -> None:
        self._left_from = (time.perf_counter(), self.wait_seconds())
        if self.profiler is not None:
            self.profiler.start()

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._epoch_began = True  # the Trainer iterates its loader afresh next (new workers unless persistent)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.recorder is not None:  # an evaluation between two steps is in neither: the next one starts after it
            self.recorder.restart()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step, wait = state.global_step, self.wait_seconds()
        if self.recorder is not None:
            self.recorder.end_step(step, wait - self._wait, self._samples, self._epoch_began)
        self._wait, samples, self._samples, self._epoch_began = wait, self._samples, 0, False
        if self.profile_steps is not None:
            self._profile_step(step, samples)
        if self.recorder is not None:
            self._take(self.recorder.ready_steps())

    def _profile_step(self, step: int, samples: int) -> None:
        first, last = self.profile_steps or (0, 0)
        if step == first - 1:
            self._begin_left_out()
        elif first <= step <= last and self._left_from is not None:
            left = self._left_out
            self._left_out = LeftOut(left.steps + 1, left.samples + samples, left.seconds, left.wait_seconds)
            if self.profiler is not None:
                self.profiler.step_done(step)
            if step == last:
                self._end_left_out()

    def _end_left_out(self) -> None:
        started, waited = self._left_from or (0.0, 0.0)
        now, wait = time.perf_counter(), self.wait_seconds()
        left = self._left_out
        self._left_out = LeftOut(left.steps, left.samples, now - started, wait - waited)
        self._left_from = None
        if self.recorder is not None:
            self.recorder.restart()  # the profiler's stop is in no step

    def _take(self, steps: list[StepPhases]) -> None:
        for step in steps:
            measured = step.step - self.start_step > self.warmup_steps and not self.left_out(step.step)
            if measured:
                self.window.add(step)
            if not self.left_out(step.step):
                self._interval.append(step)
            if step.step % self.logging_steps == 0:
                for key, value in interval_figures(self._interval).items():
                    self.sink.log_metric(key, value, step.step)
                self._interval = []

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._left_from is not None:  # training stopped inside the profiler window
            self._end_left_out()
        if self.profiler is not None:
            self.profiler.stop()
        if self.recorder is not None:
            self._take(self.recorder.finish())

    def result(self) -> RankPhases:
        """This rank's window and the steps kept out of the throughput window."""
        return self.window.result(self._left_out)


def _recorder(timing: PhaseTiming | None) -> tuple[PhaseRecorder | None, str]:
    """(the recorder, "") or (None, why not): telemetry fails soft."""
    if timing is None:
        return None, "the device gave no phase clock"
    try:
        return PhaseRecorder(timing), ""
    except Exception as exc:  # noqa: BLE001 - a device clock that cannot start: no breakdown, said why
        log.warning("phase breakdown off: %s", exc)
        return None, f"the {timing.source} did not start ({type(exc).__name__}: {str(exc)[:160]})"
