"""What training shows on the console: a progress line on stderr with the project's samples/s, and the
Trainer's log lines without the Trainer's own speed figures (which follow another rule per accelerator).

The interval between progress lines is `BRIDGETOWER_PROGRESS_SECONDS` (default 10; 0 prints every step).
"""

from __future__ import annotations

import math
import sys
import time

from transformers import TrainerCallback

# what transformers' speed_metrics adds (train_/eval_ + these): the Trainer's rates, not the project's
SPEED_SUFFIXES = ("_samples_per_second", "_steps_per_second", "_tokens_per_second")


def duration(seconds: float) -> str:
    """14s, 2m14s, 1h02m."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def progress_line(step: int, total: int, rate: float | None, wait_fraction: float, seconds: float | None,
                  done: bool = False) -> str:
    """`seconds` is the ETA while training (None: unknown until warmed up), the time taken once `done`."""
    percent = math.floor(100 * step / total) if total > 0 else 0
    if rate is not None:
        speed = f"{rate:.1f} samples/s"
    else:  # no step past the warmup yet (or, at the end, none at all: the run reports no samples/s)
        speed = "no samples/s, every step was warmup" if done else "warming up"
    when = "?" if seconds is None else duration(seconds)
    return (f"train: step {step}/{total} ({percent} %), {speed}, loader wait {round(100 * wait_fraction)} %, "
            f"{'done in' if done else 'ETA'} {when}")


class ProgressPrinter(TrainerCallback):
    """Rank 0's progress on stderr: after the first step, then at most once an interval, and at the end.

    The rate and the wait come from the throughput callback (which runs before this one at every step):
    the steady-state window, so the figure is the one the run reports; the loader wait is over the last
    interval while training, over the window at the end.
    """

    def __init__(self, throughput, interval: float):
        self.throughput = throughput  # steps.throughput.ThroughputCallback
        self.interval = interval
        self._last: tuple[float, float] | None = None  # (time, loader wait) at the previous line
        self._printed = False

    def on_train_begin(self, args, state, control, **kwargs):
        self._last, self._printed = (time.perf_counter(), self.throughput.wait_seconds()), False

    def on_step_end(self, args, state, control, **kwargs):
        now = time.perf_counter()
        if not state.is_world_process_zero or state.global_step >= state.max_steps or self._last is None:
            return  # the last step's line is the end's
        t_prev, wait_prev = self._last
        if self._printed and now - t_prev < self.interval:
            return
        wait = self.throughput.wait_seconds()
        rate = self.throughput.steady_rate(now, state.global_step)
        eta = (state.max_steps - state.global_step) * self.throughput.samples_per_step / rate if rate else None
        fraction = min(1.0, (wait - wait_prev) / (now - t_prev)) if now > t_prev else 0.0
        _show(progress_line(state.global_step, state.max_steps, rate, fraction, eta))
        self._last, self._printed = (now, wait), True

    def on_train_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or state.global_step == 0:
            return
        end = self.throughput.t_end
        rate = self.throughput.steady_rate(end, state.global_step)
        _show(progress_line(state.global_step, state.max_steps, rate, self.throughput.window_wait_fraction(end),
                            end - self.throughput.t_begin, done=True))


def _show(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def console_logs(logs: dict | None) -> dict | None:
    """The Trainer's logs as the console shows them: every key but the Trainer's own speed figures."""
    if logs is None:
        return None
    return {key: value for key, value in logs.items() if not key.endswith(SPEED_SUFFIXES)}


def without_speed_figures(printer: type) -> type:
    """`printer` (PrinterCallback or ProgressCallback) printing `console_logs`; the logs themselves stay whole."""

    class ConsolePrinter(printer):
        def on_log(self, args, state, control, logs=None, **kwargs):
            return super().on_log(args, state, control, logs=console_logs(logs), **kwargs)

    ConsolePrinter.__name__ = ConsolePrinter.__qualname__ = f"Console{printer.__name__}"
    return ConsolePrinter
