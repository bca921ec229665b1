"""Is dataloader_wait_fraction true? A loader with known injected work vs an in-memory one.

One process, the real trainer (train.prepare.prepare + train.trainer.build_trainer, tiny preset on
the CPU by default, no MLflow run, in-process loading so the injected work lands on the training
loop). Modes are interleaved over the repetitions:
- slow: the real image transform plus `--cpu-per-batch` seconds of CPU work per batch;
- fast: rows decoded up front (in-memory dataset).
Prints each mode's median wait fraction and input_bound label. Last line:
ratio=<measured wait / injected work> over the slow runs' measured windows (>= 1: nothing hidden;
the excess is the real decode). Not a test.

    .venv/bin/python benchmarks/bench_loader_wait.py [--repeats 3] [--steps 10] [--cpu-per-batch 0.3]
        [--accel cuda --model base]   (the device check runs it on the GPU) [--smoke]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time


class SlowTransform:
    """The real transform plus a fixed amount of CPU work per batch."""

    def __init__(self, transform, cpu_seconds: float):
        self.transform, self.cpu_seconds = transform, cpu_seconds

    def __call__(self, batch):
        started = time.thread_time()
        while time.thread_time() - started < self.cpu_seconds:
            pass
        return self.transform(batch)


def in_memory(dataset):
    """The rows decoded once: fetching a batch costs next to nothing."""
    import torch

    class Rows(torch.utils.data.Dataset):
        rows = [dataset[i] for i in range(len(dataset))]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, index):
            return self.rows[index]

    return Rows()


def measure(config, prepared, dataset) -> dict:
    """The window's figures of one training of `prepared` on `dataset`."""
    from bridgetower_mlflow.telemetry.sinks import NullSink
    from bridgetower_mlflow.telemetry.steps.throughput import combine_ranks
    from bridgetower_mlflow.train.trainer import build_trainer

    with_dataset = dataclasses.replace(prepared, data=dataclasses.replace(prepared.data, train=dataset))
    trainer, meter = build_trainer(config, with_dataset, NullSink())
    trainer.train()
    return combine_ranks([meter.result(config.per_device_train_batch_size)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--cpu-per-batch", type=float, default=0.3)
    parser.add_argument("--accel", default="cpu")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--smoke", action="store_true", help="one repeat of 4 steps: does it still run?")
    opts = parser.parse_args()
    if opts.smoke:
        opts.repeats, opts.steps, opts.cpu_per_batch = 1, 4, 0.05
    import transformers

    from bridgetower_mlflow.accelerators.registry import get_accelerator
    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.contract import input_bound_label
    from bridgetower_mlflow.launch.ranks import RankInfo
    from bridgetower_mlflow.train.prepare import prepare

    transformers.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as out:
        config = build_train_config(accel=opts.accel, model=opts.model, max_steps=opts.steps, logging_steps=1,
                                    per_device_train_batch_size=4, dataloader_num_workers=0, throughput_warmup_steps=2,
                                    log_model=False,
                                    output_dir=out, hf_args="--disable_tqdm true")
        adapter = get_accelerator(opts.accel)
        prepared = prepare(config, adapter, adapter.detect(1, 1), RankInfo(0, 0, 1))
        train = prepared.data.train
        slow = train.with_transform(SlowTransform(train.format["format_kwargs"]["transform"], opts.cpu_per_batch))
        fast = in_memory(train)
        fractions, truth = {"slow": [], "fast": []}, []
        for _ in range(opts.repeats):
            for mode, dataset in (("slow", slow), ("fast", fast)):
                metrics = measure(config, prepared, dataset)
                fractions[mode].append(metrics["dataloader_wait_fraction"])
                if mode == "slow":
                    waited = metrics["dataloader_wait_fraction"] * metrics["train_steady_state_seconds"]
                    truth.append(waited / (metrics["train_measured_steps"] * opts.cpu_per_batch))
    for mode, values in fractions.items():
        median = statistics.median(values)
        print(f"{mode}: dataloader_wait_fraction {median:.3f} (input_bound {input_bound_label(median)}), "
              f"runs: {', '.join(f'{v:.3f}' for v in values)}")
    print(f"ratio={statistics.median(truth):.3f}")


if __name__ == "__main__":
    main()
