"""What tracking costs a run: steady-state train_samples_per_second with everything on vs off.

Each trial is a fresh process training the tiny preset on the sample set through the public seam
`bridgetower_mlflow.train.flow.train(config, tracked=...)`:
- on: rank 0's path: the run, all params, per-step metrics through the MetricBuffer at every step
  (logging_steps=1), the host CPU sampler and MLflow system metrics (2 s), a shared sqlite store;
- off: `tracked=False`, the flow a non-main rank takes: no run, a NullSink, no samplers; the
  trainer, callbacks and measurement window are identical.
Trials alternate on/off (order flipped every pair); the ratio is taken per pair, median reported.
Last line: ratio=<on / off> (the issue's bound: >= 0.99). Not a test.

    .venv/bin/python benchmarks/bench_tracking_overhead.py [--pairs 5] [--steps 60] [--batch 8] [--torch-threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def trial(mode: str, steps: int, batch: int, workers: int, folder: Path) -> dict:
    """One training run in this process; returns its steady-state figures."""
    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.train.flow import train

    config = build_train_config(model="tiny", max_steps=steps, logging_steps=1, per_device_train_batch_size=batch,
                                dataloader_num_workers=workers, log_model=False, output_dir=str(folder / "out"),
                                experiment_name="bench-tracking-overhead", max_eval_samples=16)
    result = train(config, tracked=mode == "on")
    return {"mode": mode, "samples_per_second": result.metrics["train_samples_per_second"],
            "wait": result.metrics["dataloader_wait_fraction"], "run_id": result.run_id}


def run_trial(mode: str, opts, folder: Path) -> dict:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}",
           "BRIDGETOWER_MLFLOW_CACHE": str(opts.cache)}
    if opts.torch_threads:
        env["OMP_NUM_THREADS"] = str(opts.torch_threads)
    cmd = [sys.executable, __file__, "--trial", mode, "--steps", str(opts.steps), "--batch", str(opts.batch),
           "--workers", str(opts.workers), "--folder", str(folder)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"trial {mode} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def warm_store(folder: Path) -> None:
    """Create the sqlite schema once (~2 s), so no trial pays it."""
    from mlflow import MlflowClient

    MlflowClient(f"sqlite:///{folder / 'mlflow.db'}").search_experiments()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="OMP/torch threads per trial (0: torch's default); 1 keeps OpenMP barriers from "
                             "stalling when other jobs share the cores")
    parser.add_argument("--cache", default=os.environ.get("BRIDGETOWER_MLFLOW_CACHE", "/tmp/btcache"))
    parser.add_argument("--trial", choices=["on", "off"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.trial:
        print("RESULT " + json.dumps(trial(opts.trial, opts.steps, opts.batch, opts.workers, Path(opts.folder))))
        return
    with tempfile.TemporaryDirectory(prefix="bench-tracking-") as tmp:
        folder = Path(tmp)
        warm_store(folder)
        ratios, figures = [], {"on": [], "off": []}
        for pair in range(opts.pairs):
            order = ("on", "off") if pair % 2 == 0 else ("off", "on")
            got = {mode: run_trial(mode, opts, folder) for mode in order}
            for mode in order:
                figures[mode].append(got[mode]["samples_per_second"])
            ratios.append(got["on"]["samples_per_second"] / got["off"]["samples_per_second"])
            on, off = got["on"], got["off"]
            print(f"pair {pair + 1}: on {on['samples_per_second']:.2f}  off {off['samples_per_second']:.2f}"
                  f" samples/s  ratio {ratios[-1]:.3f}  (wait on {on['wait']:.1%}, off {off['wait']:.1%})",
                  flush=True)
    print(f"tiny preset, batch {opts.batch}, {opts.steps} steps (3 warmup), logging every step, "
          f"{opts.workers} loader worker(s), torch threads {opts.torch_threads or 'default'}; "
          f"medians: on {statistics.median(figures['on']):.2f}, "
          f"off {statistics.median(figures['off']):.2f} samples/s")
    print(f"ratio={statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
