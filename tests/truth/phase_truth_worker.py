"""A training whose phases take known times, watched from inside its parts: the truth for the phase breakdown.

The real Trainer, the project's trainer class and its step-timing callback, on a model whose forward and
backward, an optimizer whose step, and a collate function that each sleep a set time and record when each sleep
began and ended, and a callback of the observer's own that stamps each step's end (their own clocks, outside the
code under test). With `torchrun --nproc_per_node 2` it runs
DDP over gloo, and one rank can sleep longer in forward: the other then waits that long in the all-reduce.

    python tests/truth/phase_truth_worker.py OUT.json [--delay-rank R --delay-ms MS]   (or under torchrun)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from collections import defaultdict
from contextlib import contextmanager

SLEEP_MS = {"data_wait": 60, "forward": 90, "backward": 150, "optimizer": 30}
STEPS, WARMUP, BATCH = 10, 2, 2


class Observer:
    """Each part's own durations, in seconds, in call order; every sleep's (part, start, end) in call order; the
    instant each step ended, seen by a callback after the project's."""

    def __init__(self):
        self.seconds = defaultdict(list)
        self.spans: list[tuple[str, float, float]] = []
        self.step_ends: list[float] = []

    @contextmanager
    def timed(self, part: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            ended = time.perf_counter()
            self.seconds[part].append(ended - started)
            self.spans.append((part, started, ended))

    def sleep(self, part: str, extra_ms: float = 0.0) -> None:
        with self.timed(part):
            time.sleep((SLEEP_MS[part] + extra_ms) / 1000)


def build(observer: Observer, output_dir: str, forward_extra_ms: float, world: int, unmarked: frozenset = frozenset(),
          accumulate: int = 1):
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class StepEnds(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            observer.step_ends.append(time.perf_counter())

    class SleepyBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            observer.sleep("backward")
            return grad

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            observer.sleep("forward", forward_extra_ms)
            return {"loss": SleepyBackward.apply(x * self.w).sum()}

    class SleepyOptimizer(torch.optim.SGD):
        def step(self, closure=None):
            observer.sleep("optimizer")
            return super().step(closure)

    def collate(rows):
        observer.sleep("data_wait")
        return {"x": torch.ones(len(rows), 4)}

    from bridgetower_mlflow.accelerators.cpu import CpuAccelerator
    from bridgetower_mlflow.telemetry.sinks import NullSink
    from bridgetower_mlflow.telemetry.steps.step_timing import StepTimingCallback
    from bridgetower_mlflow.telemetry.steps.trainer_meter import TrainerMeter
    from bridgetower_mlflow.train.trainer import build_trainer_class

    args = TrainingArguments(output_dir=output_dir, max_steps=STEPS, per_device_train_batch_size=BATCH,
                             logging_steps=5, report_to=[], use_cpu=True, dataloader_num_workers=0,
                             save_strategy="no", disable_tqdm=True, max_grad_norm=0.0,
                             ddp_backend="gloo" if world > 1 else None, gradient_accumulation_steps=accumulate)
    cls = build_trainer_class(Trainer)
    model = Model()
    meter = TrainerMeter()  # the Trainer's train loader attaches itself when it is built
    plan = dataclasses.replace(CpuAccelerator("cpu").phase_timing(None, args), unmarked=unmarked,
                               merged_why="the test's plan")
    timing = StepTimingCallback(NullSink(), plan, lambda: meter.wait_seconds, WARMUP, 5)
    rows = STEPS * BATCH * world * accumulate * 2  # every rank fetches (and prefetches) its batches, to the end
    trainer = cls(model=model, args=args, train_dataset=[{"i": i} for i in range(rows)], step_timing=timing,
                  meter=meter, data_collator=collate, callbacks=[timing, StepEnds()],
                  optimizers=(SleepyOptimizer(model.parameters(), lr=0.01), None))
    return trainer, timing


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--delay-rank", type=int, default=-1)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--unmarked", default="", help="points not marked, comma-separated (a lazy-mode plan)")
    parser.add_argument("--accumulate", type=int, default=1, help="gradient_accumulation_steps")
    options = parser.parse_args()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    import tempfile

    from bridgetower_mlflow.telemetry.steps.phase_window import window_figures

    observer = Observer()
    extra = options.delay_ms if rank == options.delay_rank else 0.0
    with tempfile.TemporaryDirectory() as output_dir:
        unmarked = frozenset(filter(None, options.unmarked.split(",")))
        trainer, timing = build(observer, output_dir, extra, world, unmarked, options.accumulate)
        trainer.train()
    window = timing.result()
    report = timing.report()
    result = {"rank": rank, "steps": window.steps, "figures": window_figures(window),
              "observed": dict(observer.seconds), "spans": observer.spans, "step_ends": observer.step_ends,
              "all_reduce_note": report.all_reduce,
              "merged": [list(m) for m in report.merged]}
    path = options.out.replace(".json", f".rank{rank}.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
