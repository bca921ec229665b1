"""What an epoch's first step costs, against an observer outside the code under test.

The real Trainer, the project's trainer class and step-timing callback, and a loader with one worker whose
first item sleeps a known time in each new worker process (a worker's start-up: the Trainer's loader starts
its workers again at every epoch unless they persist). The observer's own callback, after the project's,
stamps each step's end and which steps opened an epoch; the dataset writes each worker's pid and sleep. The
product's `train_epoch_start_extra_seconds` must match what the observer's clock saw, and be at least the
workers' sleep; with persistent workers the same epochs cost nothing extra.
"""

from __future__ import annotations

import os
import statistics
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.gaudi_stack]
START_MS, FORWARD_MS = 300, 40
BATCH, STEPS_PER_EPOCH, EPOCHS, WARMUP = 2, 4, 4, 2


class SlowStartRows:
    """Rows whose first fetch in each worker process sleeps START_MS and writes `pid start end` to `log`."""

    def __init__(self, log, rows):
        self.log, self.rows, self.started = log, rows, set()

    def __len__(self):
        return self.rows

    def __getitem__(self, index):
        pid = os.getpid()
        if pid not in self.started:
            self.started.add(pid)
            began = time.perf_counter()
            time.sleep(START_MS / 1000)
            with open(self.log, "a", encoding="utf-8") as handle:
                handle.write(f"{pid} {began} {time.perf_counter()}\n")
        return {"i": index}


def _train(tmp_path, persistent):
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from bridgetower_mlflow.accelerators.cpu import CpuAccelerator
    from bridgetower_mlflow.telemetry.sinks import NullSink
    from bridgetower_mlflow.telemetry.steps.phase_window import window_figures
    from bridgetower_mlflow.telemetry.steps.step_timing import StepTimingCallback
    from bridgetower_mlflow.telemetry.steps.trainer_meter import TrainerMeter
    from bridgetower_mlflow.train.trainer import build_trainer_class

    class Observer(TrainerCallback):
        def __init__(self):
            self.ends, self.epoch_first, self._opened = [], [], False

        def on_epoch_begin(self, args, state, control, **kwargs):
            self._opened = True

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())
            self.epoch_first.append(self._opened)
            self._opened = False

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            time.sleep(FORWARD_MS / 1000)
            return {"loss": (x * self.w).sum()}

    log = tmp_path / f"workers-{persistent}.log"
    args = TrainingArguments(output_dir=str(tmp_path / "out"), num_train_epochs=EPOCHS,
                             per_device_train_batch_size=BATCH, logging_steps=100, report_to=[], use_cpu=True,
                             dataloader_num_workers=1, dataloader_persistent_workers=persistent,
                             save_strategy="no", disable_tqdm=True)
    meter = TrainerMeter()
    timing = StepTimingCallback(NullSink(), CpuAccelerator("cpu").phase_timing(None, args),
                                lambda: meter.wait_seconds, WARMUP, 100)
    observer = Observer()
    trainer = build_trainer_class(Trainer)(
        model=Model(), args=args, train_dataset=SlowStartRows(log, BATCH * STEPS_PER_EPOCH),
        data_collator=lambda rows: {"x": torch.ones(len(rows), 4)}, step_timing=timing, meter=meter,
        callbacks=[timing, observer])
    trainer.train()
    starts = [line.split() for line in log.read_text().splitlines()]
    return window_figures(timing.result()), observer, starts


def _observed_extra(observer):
    """Mean seconds an epoch's first step in the window took beyond the median of the window's other steps."""
    periods = [end - before for before, end in zip(observer.ends, observer.ends[1:], strict=False)]
    window = list(zip(periods, observer.epoch_first[1:], strict=True))[WARMUP - 1:]  # steps WARMUP+1 on
    firsts = [seconds for seconds, first in window if first]
    median = statistics.median(seconds for seconds, first in window if not first)
    return len(firsts), statistics.fmean(seconds - median for seconds in firsts)


def test_an_epochs_first_step_carries_the_workers_start_as_the_observer_saw_it(tmp_path):
    figures, observer, starts = _train(tmp_path, persistent=False)
    assert len({pid for pid, _, _ in starts}) == EPOCHS, starts  # a new worker each epoch
    count, observed = _observed_extra(observer)
    assert count == EPOCHS - 1  # the first epoch's first step is in the warmup
    assert figures["train_epoch_start_steps"] == count
    reported = figures["train_epoch_start_extra_seconds"]
    assert reported >= 0.9 * START_MS / 1000, (reported, "s extra reported against the workers' sleep", starts)
    assert reported == pytest.approx(observed, rel=0.1, abs=0.02), (reported, observed)
    window = sum(observer.ends[i] - observer.ends[i - 1] for i in range(WARMUP, len(observer.ends)))
    assert figures["train_epoch_start_extra_fraction"] == pytest.approx(count * observed / window, rel=0.1, abs=0.01)


def test_persistent_workers_start_once_and_the_epochs_first_steps_cost_nothing_extra(tmp_path):
    figures, observer, starts = _train(tmp_path, persistent=True)
    assert len(starts) == 1, starts
    count, observed = _observed_extra(observer)
    assert figures["train_epoch_start_steps"] == count == EPOCHS - 1
    assert abs(figures["train_epoch_start_extra_seconds"]) < 0.2 * START_MS / 1000, (figures, observed)
