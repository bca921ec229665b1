"""Data-loader capacity without a model: samples/s the real loader path delivers, per worker count.

The project's path: the sample set loaded and tokenized by data.loading.prepare_data (captions padded
to max_seq_length, images undecoded), its `with_transform(ImageTransform)` decoding in the workers,
a torch DataLoader as the HF Trainer builds it (batch 48, drop_last, pin_memory=True, random order),
the project's collate_batch; the batch normalize is the device's work and is not run here. Beside it:
the same with the Pillow fallback (BRIDGETOWER_IMAGE_BACKEND=pillow, what runs where OpenCV's wheel is
missing), and the processor-based pipeline the study's script used: BridgeTowerImageProcessor on
each image in the worker, float pixel_values stacked in the collate. Pipelines and worker counts are
interleaved over the rounds. Each run is timed in steady state, from the moment every worker has
delivered its first batch (worker start-up and the first decode excluded: they happen once per epoch)
to the last batch. Median samples/s, the large preset's 294 px; `--rounds` rounds, fewer (at least 2)
when the next would end past `--budget` seconds, so that a loaded machine still finishes in ~5 min.
Last line: ratio=<project 1-worker / processor 1-worker>. Not a test.

    .venv/bin/python benchmarks/bench_loader_capacity.py [--rounds 5] [--budget 220] [--workers 0,1,2,4]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
import warnings
from types import SimpleNamespace

BATCH, SIZE, TARGETS = 48, 294, (100, 200, 400)


def prepared_train():
    """The default sample set's train split (240 rows), as prepare_data hands it to the trainer."""
    from bridgetower_mlflow.data.loading import prepare_data
    from bridgetower_mlflow.model.load import preset_tokenizer

    config = SimpleNamespace(dataset="sample", dataset_config="", seed=42, image_column="image",
                             caption_column="image_description", max_train_samples=0, max_eval_samples=0,
                             max_seq_length=128)
    return prepare_data(config, preset_tokenizer(), SIZE).train


class ProcessorTransform:
    """with_transform function: BridgeTowerImageProcessor on each image, in the worker."""

    def __init__(self, size: int):
        from bridgetower_mlflow.model.load import preset_image_processor

        self.processor = preset_image_processor(size)

    def __call__(self, batch: dict) -> dict:
        from bridgetower_mlflow.data.cpu_images import open_image

        out = {k: batch[k] for k in ("input_ids", "attention_mask")}
        out["pixel_values"] = [self.processor(open_image(s).convert("RGB"), return_tensors="pt")["pixel_values"][0]
                               for s in batch["image"]]
        return out


def processor_collate(examples):
    import torch

    return {"pixel_values": torch.stack([ex["pixel_values"] for ex in examples]),
            "input_ids": torch.tensor([ex["input_ids"] for ex in examples], dtype=torch.long),
            "attention_mask": torch.tensor([ex["attention_mask"] for ex in examples], dtype=torch.long),
            "return_loss": True}


def use_backend(backend: str) -> None:
    """The JPEG backend the next loader's workers use (forked: the module's state; spawned: the env)."""
    from bridgetower_mlflow.data import cpu_images as image_transform

    image_transform.BACKEND = backend
    os.environ["BRIDGETOWER_IMAGE_BACKEND"] = backend


def run_once(pipeline, workers: int, batches: int, seed: int) -> float:
    """Steady-state samples/s of one loader: `batches` timed after each worker's first batch."""
    import torch
    from torch.utils.data import DataLoader

    dataset, collate_fn, backend = pipeline
    use_backend(backend)
    warm = max(workers, 1)
    total = (warm + batches) * BATCH
    order = torch.randperm(total, generator=torch.Generator().manual_seed(seed)) % len(dataset)
    loader = DataLoader(dataset, batch_size=BATCH, sampler=order.tolist(), collate_fn=collate_fn,
                        num_workers=workers, pin_memory=True, drop_last=True)
    count, started = 0, None
    for index, batch in enumerate(loader):
        assert "image_errors" not in batch, batch
        if index + 1 == warm:
            started = time.perf_counter()
        elif index >= warm:
            count += batch["input_ids"].shape[0]
    return count / (time.perf_counter() - started)


def workers_needed(per_worker: float, target: float) -> int:
    return max(1, math.ceil(target / per_worker))


def report(rates: dict, workers: list[int], rounds: int, rows: int) -> None:
    from bridgetower_mlflow.data.cpu_images import BACKEND

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{rows} samples, {SIZE} px, batch {BATCH}, {rounds} interleaved rounds, median steady-state "
          f"samples/s (per worker in parentheses); pin_memory=True (a no-op without an accelerator)")
    over = [w for w in workers if w >= cores]
    if over:
        print(f"NOTE: {cores} cores here, shared with other jobs: at {over} workers the workers plus the main "
              f"process (unpickling, pinning) exceed them, so those columns measure the machine, not the loader")
    print(f"{'pipeline':24s}" + "".join(f"{f'w={w}':>19s}" for w in workers))
    for name in dict.fromkeys(p for p, _ in rates):
        cells = [statistics.median(rates[(name, w)]) for w in workers]
        print(f"{name:24s}" + "".join(f"{c:9.1f} ({c / max(w, 1):5.1f}/w)" for c, w in zip(cells, workers)))
    one = 1 if 1 in workers else workers[0]
    for name in dict.fromkeys(p for p, _ in rates):
        per_worker = statistics.median(rates[(name, one)]) / max(one, 1)
        need = ", ".join(f"{t}/s: {workers_needed(per_worker, t)}" for t in TARGETS)
        print(f"workers per device at {one}-worker capacity, {name}: {need}")
    print(f"(project JPEG backend here: {BACKEND})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", default="0,1,2,4")
    parser.add_argument("--batches", type=int, default=10, help="timed batches per run of the project's pipeline")
    parser.add_argument("--budget", type=float, default=220, help="seconds for the rounds (see above)")
    opts = parser.parse_args()
    import torch

    from bridgetower_mlflow.data import cpu_images as image_transform
    from bridgetower_mlflow.data.collate import collate_batch

    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    warnings.filterwarnings("ignore", message=".*worker processes in total.*")  # 4 workers on 2 cores: meant
    torch.set_num_threads(1)  # 0 workers: one core in-process; DataLoader workers run one thread anyway
    backend = image_transform.BACKEND
    train = prepared_train()
    pipelines = {"project": ((train, collate_batch, backend), opts.batches),
                 "project-pillow": ((train, collate_batch, "pillow"), opts.batches // 2),
                 "processor": ((train.with_transform(ProcessorTransform(SIZE)), processor_collate, backend),
                               max(2, opts.batches // 4))}
    if backend != "opencv":
        del pipelines["project-pillow"]  # the project's pipeline is the fallback already
    workers = [int(w) for w in opts.workers.split(",")]
    for pipeline, _ in pipelines.values():  # warm-up: imports, file cache, the processor's first call
        run_once(pipeline, 0, 1, seed=0)
    rates = {(name, w): [] for name in pipelines for w in workers}
    started, rounds = time.monotonic(), 0
    try:
        while rounds < opts.rounds:
            if rounds >= 2 and (time.monotonic() - started) * (rounds + 1) / rounds > opts.budget:
                break
            for w in workers:
                for name, (pipeline, batches) in pipelines.items():
                    rates[(name, w)].append(run_once(pipeline, w, batches, seed=rounds))
            rounds += 1
    finally:
        use_backend(backend)
    report(rates, workers, rounds, len(train))
    print(f"ratio={statistics.median(rates[('project', 1)]) / statistics.median(rates[('processor', 1)]):.2f}"
          if 1 in workers else "ratio=nan")


if __name__ == "__main__":
    main()
