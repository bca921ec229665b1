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

from ..contract import (
    LOGGED_TRAINER_KEYS,
    MEASURED_STEPS_METRIC,
    STEADY_SECONDS_METRIC,
    STEP_THROUGHPUT_METRIC,
    STEP_WAIT_METRIC,
    THROUGHPUT_METRIC,
    THROUGHPUT_PER_DEVICE_METRIC,
    WAIT_ALL_STEPS_METRIC,
    WAIT_METRIC,
)

if TYPE_CHECKING:
    from .energy import EnergyWindow

log = logging.getLogger(__name__)


@dataclass
class RankThroughput:
    """One rank's measured window: after the first `warmup_steps` steps until training ended."""

    steps: int
    samples: int
    seconds: float
    wait_seconds: float
    total_seconds: float
    total_wait_seconds: float


class ThroughputCallback(TrainerCallback):
    """Records step times, logs `step_samples_per_second` and `loss` at each logging step."""

    def __init__(self, sink, timed_loader_ref, samples_per_step: int, warmup_steps: int,
                 logging_steps: int):
        self.sink = sink
        self.loader_ref = timed_loader_ref  # callable -> TimedLoader (created lazily by the trainer)
        self.samples_per_step = samples_per_step
        self.warmup_steps = warmup_steps
        self.logging_steps = logging_steps
        self.start_step = 0
        self.t_begin = self.t_warm = self.t_end = None
        self.wait_warm = 0.0
        self.window: EnergyWindow | None = None  # read at the same instants as the clock
        self._last = None  # (time, step, wait) at the previous logging step

    def wait_seconds(self) -> float:
        """Seconds the training loop has waited for batches so far."""
        loader = self.loader_ref()
        return loader.wait_seconds if loader is not None else 0.0

    def steady_rate(self, now: float, step: int) -> float | None:
        """Samples/s of the whole job over the window up to `now` (at `step`); None before a step past the warmup.

        Rank 0's window with every rank's samples: the live estimate of what `combine_ranks` reports.
        """
        measured = step - self.start_step - self.warmup_steps
        if self.t_warm is None or measured <= 0 or now <= self.t_warm:
            return None
        return measured * self.samples_per_step / (now - self.t_warm)

    def window_wait_fraction(self, now: float) -> float:
        """This rank's loader wait over the window up to `now` (over every step before the window opens)."""
        start, waited = (self.t_warm, self.wait_warm) if self.t_warm is not None else (self.t_begin, 0.0)
        seconds = now - start
        return min(1.0, (self.wait_seconds() - waited) / seconds) if seconds > 0 else 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.start_step = state.global_step  # > 0 when resuming from a checkpoint
        if self.start_step:
            log.info("resumed at step %d", self.start_step)
        self.t_begin = time.perf_counter()
        self._last = (self.t_begin, self.start_step, 0.0)
        if self.warmup_steps == 0:  # no step to leave out: the window opens now (on_step_end first sees step 1)
            self._open_window(self.t_begin)

    def _open_window(self, now: float) -> None:
        self.t_warm, self.wait_warm = now, self.wait_seconds()
        if self.window:
            self.window.start()

    def on_step_end(self, args, state, control, **kwargs):
        now, step = time.perf_counter(), state.global_step
        if self.warmup_steps and step - self.start_step == self.warmup_steps:
            self._open_window(now)
        if step % self.logging_steps == 0 and self._last is not None:
            t_prev, step_prev, wait_prev = self._last
            elapsed, wait = now - t_prev, self.wait_seconds()
            if elapsed > 0 and step > step_prev:
                self.sink.log_metric(STEP_THROUGHPUT_METRIC,
                                     (step - step_prev) * self.samples_per_step / elapsed, step)
                self.sink.log_metric(STEP_WAIT_METRIC, min(1.0, (wait - wait_prev) / elapsed), step)
            self._last = (now, step, wait)

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in LOGGED_TRAINER_KEYS:
            if logs and isinstance(logs.get(key), (int, float)):
                self.sink.log_metric(key, float(logs[key]), state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        self.t_end = time.perf_counter()
        self.final_step = state.global_step
        if self.window:
            self.window.stop()

    def result(self, per_rank_samples_per_step: int) -> RankThroughput:
        """This rank's window (steps 0 when a resumed run had no step left past the warmup)."""
        steps = self.final_step - self.start_step - self.warmup_steps
        total_wait = self.wait_seconds()
        if self.t_warm is None or steps <= 0:
            steps, t_warm, wait_warm = 0, self.t_end, total_wait
        else:
            t_warm, wait_warm = self.t_warm, self.wait_warm
        return RankThroughput(
            steps=steps, samples=steps * per_rank_samples_per_step, seconds=self.t_end - t_warm,
            wait_seconds=total_wait - wait_warm, total_seconds=self.t_end - self.t_begin,
            total_wait_seconds=total_wait,
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
    seconds = max(r.seconds for r in ranks)
    samples = sum(r.samples for r in ranks)
    wait = max(r.wait_seconds / r.seconds for r in ranks if r.seconds > 0)
    return {
        THROUGHPUT_METRIC: samples / seconds,
        THROUGHPUT_PER_DEVICE_METRIC: samples / seconds / len(ranks),
        STEADY_SECONDS_METRIC: seconds,
        MEASURED_STEPS_METRIC: ranks[0].steps,
        WAIT_METRIC: min(1.0, wait),
        WAIT_ALL_STEPS_METRIC: all_steps_wait,
    }
