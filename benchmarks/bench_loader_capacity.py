"""Data-loader capacity without a model: samples/s the real loader path delivers, per worker count.

The project's path: the sample set loaded and tokenized by data.loading.prepare_data (captions padded
to max_seq_length, images undecoded), its `with_transform(ImageTransform)` decoding in the workers,
a torch DataLoader as the HF Trainer builds it (batch 48, drop_last, pin_memory=True, random order),
the project's collate_batch; the batch normalize is the device's work and is not run here. Beside it:
the same with the Pillow fallback (BRIDGETOWER_IMAGE_BACKEND=pillow, what runs where OpenCV's wheel is
missing), and the processor-based pipeline the study's script used: BridgeTowerImageProcessor on
each image in the worker, float pixel_values stacked in the collate. The JPEG backend is the product's
documented switch, read as a process starts: each backend's pipelines run in a process of their own started
with it (`--serve`), which the driver hands one loader at a time, so pipelines and worker counts are still
interleaved over the rounds; a server says which loader it is (the `data_loader` tag's value) and the
driver checks it. Each run is timed in steady state, from the moment every worker has
delivered its first batch (worker start-up and the first decode excluded: they happen once per epoch)
to the last batch. Median samples/s, the large preset's 294 px; `--rounds` rounds, fewer (at least 2)
when the next would end past `--budget` seconds, so that a loaded machine still finishes in ~5 min.
Last line: ratio=<project 1-worker / processor 1-worker>. Not a test.

    .venv/bin/python benchmarks/bench_loader_capacity.py [--rounds 5] [--budget 220] [--workers 0,1,2,4] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import warnings

BATCH, SIZE, TARGETS = 48, 294, (100, 200, 400)


def prepared_train():
    """The default sample set's train split (240 rows), as prepare_data hands it to the trainer."""
    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.data.loading import prepare_data
    from bridgetower_mlflow.model.load import preset_tokenizer

    config = build_train_config(max_seq_length=128, max_train_samples=0, max_eval_samples=0)
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


def run_once(pipeline, workers: int, batches: int, seed: int) -> float:
    """Steady-state samples/s of one loader: `batches` timed after each worker's first batch."""
    import torch
    from torch.utils.data import DataLoader

    dataset, collate_fn = pipeline
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


def serve(pipelines: list[str]) -> None:
    """A backend's process: says which loader it is, then runs each loader asked for on stdin (one JSON line:
    pipeline, workers, batches, seed) and answers its samples/s."""
    import torch

    from bridgetower_mlflow.data.collate import collate_batch
    from bridgetower_mlflow.data.cpu_images import cpu_loader_name

    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    warnings.filterwarnings("ignore", message=".*worker processes in total.*")  # 4 workers on 2 cores: meant
    torch.set_num_threads(1)  # 0 workers: one core in-process; DataLoader workers run one thread anyway
    train = prepared_train()
    made = {"project": (train, collate_batch),
            "processor": (train.with_transform(ProcessorTransform(SIZE)), processor_collate)}
    for name in pipelines:  # warm-up: imports, file cache, the processor's first call
        run_once(made[name], 0, 1, seed=0)
    print(f"READY {json.dumps({'loader': cpu_loader_name(), 'rows': len(train)})}", flush=True)
    for line in sys.stdin:
        asked = json.loads(line)
        rate = run_once(made[asked["pipeline"]], asked["workers"], asked["batches"], asked["seed"])
        print(f"RATE {rate}", flush=True)


class Server:
    """A `--serve` process for one JPEG backend ("" = the product's default)."""

    def __init__(self, backend: str, pipelines: list[str]):
        env = dict(os.environ)
        env.pop("BRIDGETOWER_IMAGE_BACKEND", None)
        if backend:
            env["BRIDGETOWER_IMAGE_BACKEND"] = backend
        self.process = subprocess.Popen([sys.executable, __file__, "--serve", ",".join(pipelines)], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready = json.loads(self.answer("READY"))

    def answer(self, prefix: str) -> str:
        for line in self.process.stdout:
            if line.startswith(prefix + " "):
                return line[len(prefix) + 1:]
        raise SystemExit(f"the {prefix} line never came: the server exited with {self.process.wait()}")

    def rate(self, pipeline: str, workers: int, batches: int, seed: int) -> float:
        asked = {"pipeline": pipeline, "workers": workers, "batches": batches, "seed": seed}
        self.process.stdin.write(json.dumps(asked) + "\n")
        self.process.stdin.flush()
        return float(self.answer("RATE"))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def workers_needed(per_worker: float, target: float) -> int:
    return max(1, math.ceil(target / per_worker))


def report(rates: dict, workers: list[int], rounds: int, ready: dict) -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{ready['rows']} samples, {SIZE} px, batch {BATCH}, {rounds} interleaved rounds, median steady-state "
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
    print(f"(the project's loader here: {ready['loader']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", default="0,1,2,4")
    parser.add_argument("--batches", type=int, default=10, help="timed batches per run of the project's pipeline")
    parser.add_argument("--budget", type=float, default=220, help="seconds for the rounds (see above)")
    parser.add_argument("--smoke", action="store_true", help="one round at 1 worker, 2 batches: does it still run?")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve:
        return serve(opts.serve.split(","))
    if opts.smoke:
        opts.rounds, opts.workers, opts.batches = 1, "1", 2
    from bridgetower_mlflow.contract import CPU_PILLOW_LOADER

    workers = [int(w) for w in opts.workers.split(",")]
    default = Server("", ["project", "processor"])
    servers = {"project": default}
    if default.ready["loader"] != CPU_PILLOW_LOADER:  # else the project's pipeline is the fallback already
        servers["project-pillow"] = Server("pillow", ["project"])
        if servers["project-pillow"].ready["loader"] != CPU_PILLOW_LOADER:
            raise SystemExit(f"BRIDGETOWER_IMAGE_BACKEND=pillow ran {servers['project-pillow'].ready['loader']}")
    servers["processor"] = default
    batches = {"project": opts.batches, "project-pillow": opts.batches // 2, "processor": max(2, opts.batches // 4)}
    rates = {(name, w): [] for name in servers for w in workers}
    started, rounds = time.monotonic(), 0
    try:
        while rounds < opts.rounds:
            if rounds >= 2 and (time.monotonic() - started) * (rounds + 1) / rounds > opts.budget:
                break
            for w in workers:
                for name, server in servers.items():
                    pipeline = "processor" if name == "processor" else "project"
                    rates[(name, w)].append(server.rate(pipeline, w, max(1, batches[name]), seed=rounds))
            rounds += 1
    finally:
        for server in set(servers.values()):
            server.close()
    report(rates, workers, rounds, default.ready)
    print(f"ratio={statistics.median(rates[('project', 1)]) / statistics.median(rates[('processor', 1)]):.2f}"
          if 1 in workers else "ratio=nan")
    return None


if __name__ == "__main__":
    main()
