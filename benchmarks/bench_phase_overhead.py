"""What the phase breakdown costs a run: samples/s with it on vs off, side by side.

Each trial is a fresh process training the tiny preset on the sample set through the public seam
`bridgetower_mlflow.train.flow.train(config, tracked=False)` (no run, a NullSink: only the training loop and
its callbacks, where the breakdown lives):
- on: as shipped: the step marks in the Trainer (input, forward, backward), the clock's marker at each step's
  end, the late read-back, the per-interval figures (logging_steps=1: every step) and the window;
- off: the Trainer without the step-marks layer and without a clock (`with_step_marks` replaced by the
  identity, `_phase_timing` by None): the step-timing callback's host bookkeeping is all that is left.
Trials alternate on/off (order flipped every pair), each torch-thread setting in turn within a pair
(OMP_NUM_THREADS: 1, and every core). Prints each setting's samples/s medians and on/off ratio, and last
`ratio=<the lower of the settings' median on/off ratios>`. Not a test.

    .venv/bin/python benchmarks/bench_phase_overhead.py [--pairs 5] [--steps 40] [--batch 8]
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

REPO = Path(__file__).resolve().parents[1]


def trial(mode: str, steps: int, batch: int) -> None:
    """One training (inside a trial process); prints {"samples_per_second": ...} as JSON."""
    import bridgetower_mlflow.train.trainer as trainer_module
    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.train.flow import train

    if mode == "off":
        trainer_module.with_step_marks = lambda base: base  # noqa: B010 - the benchmark's own switch
        trainer_module._phase_timing = lambda prepared: None  # noqa: B010
    with tempfile.TemporaryDirectory() as output_dir:
        config = build_train_config(max_steps=steps, logging_steps=1, per_device_train_batch_size=batch,
                                    dataloader_num_workers=0, log_model=False, max_eval_samples=4,
                                    max_seq_length=32, throughput_warmup_steps=3, output_dir=output_dir)
        result = train(config, tracked=False)
    print(json.dumps({"samples_per_second": result.metrics["train_samples_per_second"]}))


def run_trial(mode: str, threads: int, options: argparse.Namespace, cache: str) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "BRIDGETOWER_MLFLOW_CACHE": cache,
           "BRIDGETOWER_PROGRESS_SECONDS": "1000", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, __file__, "--trial", mode, "--steps", str(options.steps), "--batch",
                           str(options.batch)], capture_output=True, text=True, env=env, cwd=REPO, timeout=1800)
    if done.returncode:
        raise SystemExit(f"trial {mode} failed: {done.stderr[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["samples_per_second"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--trial", choices=("on", "off"))
    options = parser.parse_args()
    if options.trial:
        trial(options.trial, options.steps, options.batch)
        return
    settings = (1, os.cpu_count() or 1)
    rates: dict[int, dict[str, list[float]]] = {threads: {"on": [], "off": []} for threads in settings}
    with tempfile.TemporaryDirectory() as cache:
        from bridgetower_mlflow.data.sample import generate_sample_set

        os.environ["BRIDGETOWER_MLFLOW_CACHE"] = cache
        generate_sample_set()
        run_trial("on", settings[0], argparse.Namespace(steps=4, batch=options.batch), cache)  # caches FLOPs
        for pair in range(options.pairs):
            for threads in settings:
                for mode in (("on", "off") if pair % 2 == 0 else ("off", "on")):
                    rates[threads][mode].append(run_trial(mode, threads, options, cache))
                ratio = rates[threads]["on"][-1] / rates[threads]["off"][-1]
                print(f"pair {pair + 1} threads {threads}: on {rates[threads]['on'][-1]:.2f} off "
                      f"{rates[threads]['off'][-1]:.2f} samples/s, on/off {ratio:.3f}", flush=True)
    medians = {}
    for threads in settings:
        pairs = [on / off for on, off in zip(rates[threads]["on"], rates[threads]["off"], strict=True)]
        medians[threads] = statistics.median(pairs)
        print(f"threads {threads}: median on {statistics.median(rates[threads]['on']):.2f}, off "
              f"{statistics.median(rates[threads]['off']):.2f} samples/s; median on/off {medians[threads]:.3f} "
              f"(pairs: {', '.join(f'{p:.3f}' for p in pairs)})")
    print(f"ratio={min(medians.values()):.3f}")


if __name__ == "__main__":
    main()
