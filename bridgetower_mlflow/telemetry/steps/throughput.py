"""Steady-state throughput with one rule on every accelerator.

Host clocks only: the step loop gains no device synchronization. The interval metrics use the
synchronization the Trainer already does when it reads the loss at each logging step.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from transformers import TrainerCallback

from ...contract import (
    LOGGED_TRAINER_KEYS,
    MEASURED_SAMPLES_METRIC,
    MEASURED_STEPS_METRIC,
    STEADY_SECONDS_METRIC,
    STEP_THROUGHPUT_METRIC,
    STEP_WAIT_METRIC,
    THROUGHPUT_METRIC,
    THROUGHPUT_PER_DEVICE_METRIC,
    WAIT_ALL_STEPS_METRIC,
    WAIT_METRIC,
    WINDOW_EVAL_SECONDS_METRIC,
    WINDOW_SAVE_SECONDS_METRIC,
)

if TYPE_CHECKING:
    from ..sinks import MetricSink
    from ..system.energy import EnergyWindow
    from .trainer_meter import TrainerMeter

log = logging.getLogger(__name__)


@dataclass
class RankThroughput:
    """One rank's measured window: after the first `warmup_steps` steps until training ended."""

    steps: int
    samples: int  # rows of the batches its steps ran (a GA remainder and a smaller last batch as they ran)
    seconds: float  # the window's wall time less the evaluations inside it
    wait_seconds: float
    total_seconds: float
    total_wait_seconds: float
    eval_seconds: float = 0.0  # evaluations inside the window (not in `seconds`)
    save_seconds: float = 0.0  # checkpoint saves inside the window


class ThroughputCallback(TrainerCallback):
    """Records step times and the rows the steps ran; logs `step_samples_per_second` and `loss` at each logging step.

    Rows are counted by the train loader as it hands batches to the step loop (read through `meter`); a callback
    driven without a loader (unit tests: no meter, or none attached) counts `samples_per_step` a step. The window
    is wall time from the end of the last warmup step to the end of training, less the evaluations inside it (an
    `eval_steps` run trains as fast as one without): the evaluations and checkpoint saves inside it are the
    Trainer's own calls, timed by the Trainer (through `meter`); saves stay in (they are training's cost).
    """

    def __init__(self, sink: MetricSink, meter: TrainerMeter | None, samples_per_step: int, warmup_steps: int,
                 logging_steps: int, window: EnergyWindow | None = None):
        self.sink = sink
        self.meter = meter  # the train loader's figures once the Trainer has built it, its evaluations and saves
        self.samples_per_step = samples_per_step  # nominal, all ranks: batch x world x accumulation
        self.warmup_steps = warmup_steps
        self.logging_steps = logging_steps
        self.start_step = 0
        self.world = 1
        self.t_begin: float | None = None
        self.t_warm: float | None = None
        self.t_end: float | None = None
        self.final_step: int | None = None  # the global step at the end of training
        self.wait_warm = 0.0
        self.samples_warm = self.samples_end = 0
        self.window = window  # the energy counters, read at the same instants as the clock
        self._last: tuple[float, int, float, int] | None = None  # (time, step, wait, rows) at the previous logging step
        if meter is not None and window is not None:
            meter.evaluations.listeners.append(window.pause)  # an evaluation's joules are not training's

    def wait_seconds(self) -> float:
        """Seconds the training loop has waited for batches so far."""
        return self.meter.wait_seconds if self.meter is not None else 0.0

    def _rows(self, step: int) -> int:
        """This rank's rows handed to the step loop so far (at `step`)."""
        if self.meter is not None and self.meter.attached:  # _loader_counts(), spelled out for the type checker
            return self.meter.rows
        return (step - self.start_step) * (self.samples_per_step // self.world)

    def _loader_counts(self) -> bool:
        return self.meter is not None and self.meter.attached

    def steady_rate(self, now: float, step: int) -> float | None:
        """Samples/s of the whole job over the window up to `now` (at `step`); None before a step past the warmup.

        Rank 0's window with rank 0's rows times the ranks: the live estimate of what `combine_ranks` reports.
        """
        measured = step - self.start_step - self.warmup_steps
        if self.t_warm is None or measured <= 0 or now <= self.t_warm:
            return None
        seconds = now - self.t_warm - self._eval_seconds(self.t_warm, now)
        return (self._rows(step) - self.samples_warm) * self.world / seconds if seconds > 0 else None

    def _eval_seconds(self, start: float, end: float) -> float:
        return self.meter.evaluations.seconds_within(start, end) if self.meter is not None else 0.0

    def window_wait_fraction(self, now: float) -> float:
        """This rank's loader wait over the window up to `now` (over every step before the window opens)."""
        if self.t_warm is not None:
            start, waited = self.t_warm, self.wait_warm
        elif self.t_begin is not None:
            start, waited = self.t_begin, 0.0
        else:
            raise RuntimeError("the loader wait is read before training began (on_train_begin)")
        seconds = now - start - self._eval_seconds(start, now)
        return min(1.0, (self.wait_seconds() - waited) / seconds) if seconds > 0 else 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.start_step = state.global_step  # > 0 when resuming from a checkpoint
        self.world = max(1, int(getattr(args, "world_size", 1) or 1))
        if self.start_step:
            log.info("resumed at step %d", self.start_step)
        self.t_begin = time.perf_counter()
        self._last = (self.t_begin, self.start_step, 0.0, self._rows(self.start_step))
        if self.warmup_steps == 0:  # no step to leave out: the window opens now (on_step_end first sees step 1)
            self._open_window(self.t_begin, self.start_step)

    def _open_window(self, now: float, step: int) -> None:
        self.t_warm, self.wait_warm, self.samples_warm = now, self.wait_seconds(), self._rows(step)
        if self.window:
            self.window.start()

    def on_step_end(self, args, state, control, **kwargs):
        now, step = time.perf_counter(), state.global_step
        if self.warmup_steps and step - self.start_step == self.warmup_steps:
            self._open_window(now, step)
        if step % self.logging_steps == 0 and self._last is not None:
            t_prev, step_prev, wait_prev, rows_prev = self._last
            elapsed, wait, rows = now - t_prev, self.wait_seconds(), self._rows(step)
            if elapsed > 0 and step > step_prev:
                self.sink.log_metric(STEP_THROUGHPUT_METRIC, (rows - rows_prev) * self.world / elapsed, step)
                self.sink.log_metric(STEP_WAIT_METRIC, min(1.0, (wait - wait_prev) / elapsed), step)
            self._last = (now, step, wait, rows)

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in LOGGED_TRAINER_KEYS:
            if logs and isinstance(logs.get(key), (int, float)):
                self.sink.log_metric(key, float(logs[key]), state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if self.meter is not None:  # workers still held mid-epoch go inside the window, as on every Trainer
            self.meter.close()
        self.t_end = time.perf_counter()
        self.final_step = state.global_step
        self.samples_end = self._rows(state.global_step)
        if self.window:
            self.window.stop()

    def result(self, per_rank_samples_per_step: int | None = None) -> RankThroughput:
        """This rank's window (steps 0 when a resumed run had no step left past the warmup).

        `per_rank_samples_per_step` counts the rows only where no loader did (the callback driven alone)."""
        if self.final_step is None or self.t_begin is None or self.t_end is None:
            raise RuntimeError("the throughput window is read before training ended (on_train_end)")
        steps = self.final_step - self.start_step - self.warmup_steps
        total_wait = self.wait_seconds()
        total = self.t_end - self.t_begin - self._eval_seconds(self.t_begin, self.t_end)
        if self.t_warm is None or steps <= 0:
            return RankThroughput(steps=0, samples=0, seconds=0.0, wait_seconds=0.0, total_seconds=total,
                                  total_wait_seconds=total_wait)
        samples = self.samples_end - self.samples_warm
        if not self._loader_counts() and per_rank_samples_per_step is not None:
            samples = steps * per_rank_samples_per_step
        evals, saves = self._eval_seconds(self.t_warm, self.t_end), 0.0
        if self.meter is not None:
            saves = self.meter.saves.seconds_within(self.t_warm, self.t_end)
        return RankThroughput(
            steps=steps, samples=samples, seconds=self.t_end - self.t_warm - evals,
            wait_seconds=total_wait - self.wait_warm, total_seconds=total,
            total_wait_seconds=total_wait, eval_seconds=evals, save_seconds=saves,
        )


def combine_ranks(ranks: list[RankThroughput]) -> dict:
    """Global figures: samples summed over ranks over the slowest rank's window.

    Without a measured step (a resume that had only warmup steps left) there is no steady-state
    figure: only the wait over all steps is reported, never a number from the warmup.
    """
    all_steps_wait = min(1.0, max(r.total_wait_seconds / r.total_seconds if r.total_seconds > 0 else 0.0
                                  for r in ranks))
    if min(r.steps for r in ranks) <= 0:
        return {WAIT_METRIC: all_steps_wait, WAIT_ALL_STEPS_METRIC: all_steps_wait}
    slowest = max(ranks, key=lambda r: r.seconds)
    samples = sum(r.samples for r in ranks)
    wait = max(r.wait_seconds / r.seconds for r in ranks if r.seconds > 0)
    return {
        THROUGHPUT_METRIC: samples / slowest.seconds,
        THROUGHPUT_PER_DEVICE_METRIC: samples / slowest.seconds / len(ranks),
        STEADY_SECONDS_METRIC: slowest.seconds,
        MEASURED_STEPS_METRIC: ranks[0].steps,
        MEASURED_SAMPLES_METRIC: samples,
        WINDOW_EVAL_SECONDS_METRIC: slowest.eval_seconds,
        WINDOW_SAVE_SECONDS_METRIC: slowest.save_seconds,
        WAIT_METRIC: min(1.0, wait),
        WAIT_ALL_STEPS_METRIC: all_steps_wait,
    }
