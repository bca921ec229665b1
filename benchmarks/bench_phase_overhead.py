"""What the phase breakdown costs a run: samples/s with it on vs off, side by side.

Each trial is a fresh process training the tiny preset on the sample set through the public seam
`bridgetower_mlflow.train.flow.train(config, tracked=False)` (no run, a NullSink: only the training loop and
its callbacks, where the breakdown lives):
- on: as shipped: the step marks in the Trainer (input, forward, backward), the step-timing callback with the
  device's clock, the late read-back, the per-interval figures (logging_steps=1: every step) and the window;
- off: the same Trainer as its `train()` starts (trainer_hooks.py, through transformers' callback API) without
  the breakdown: its StepTimingCallback removed and its `step_timing` None, the state the Trainer's constructor
  documents for "no phase marks". The trial checks that "on" logged phase figures and "off" none.
Besides samples/s, each trial reads the process's CPU time (all threads) over the throughput window per trained
sample. Trials alternate on/off (order flipped every pair), each `--threads` setting (OMP_NUM_THREADS) in turn
within a pair; no pair starts that would end past `--budget` seconds (the first always runs). The breakdown's own
work per step is also timed directly, in a loop on the calling thread's CPU clock: the marks of one micro-batch,
the step's end, its read-back and its interval figures. Last line: ratio=<the lowest setting's median on/off
samples/s>. Not a test.

    .venv/bin/python benchmarks/bench_phase_overhead.py [--pairs 5] [--steps 40] [--batch 8] [--threads 1,2]
        [--budget 540] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WARMUP_STEPS = 3


def trial(mode: str, steps: int, batch: int) -> dict:
    """One training (inside a trial process): its samples/s, the CPU time (every thread of the process) per
    trained sample over the throughput window, and how many phase figures it reported."""
    from trainer_hooks import at_train_start, window_marks

    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.contract import MEASURED_SAMPLES_METRIC, THROUGHPUT_METRIC
    from bridgetower_mlflow.telemetry.steps.step_timing import StepTimingCallback
    from bridgetower_mlflow.train.flow import train

    marks: list[float] = []

    def starting(trainer) -> None:
        if mode == "off":
            trainer.remove_callback(StepTimingCallback)
            trainer.step_timing = None
        trainer.add_callback(window_marks(WARMUP_STEPS, lambda: marks.append(time.process_time())))

    at_train_start(starting)
    with tempfile.TemporaryDirectory() as output_dir:
        config = build_train_config(max_steps=steps, logging_steps=1, per_device_train_batch_size=batch,
                                    dataloader_num_workers=0, log_model=False, max_eval_samples=4,
                                    max_seq_length=32, throughput_warmup_steps=WARMUP_STEPS, output_dir=output_dir)
        metrics = train(config, tracked=False).metrics
    return {"samples_per_second": metrics[THROUGHPUT_METRIC],
            "cpu_per_sample": (marks[-1] - marks[0]) / metrics[MEASURED_SAMPLES_METRIC],
            "phase_figures": sum(key.startswith("train_phase_") for key in metrics)}


def per_step_cost(steps: int = 2000) -> float:
    """Seconds of the calling thread's CPU the breakdown adds to one step on the host clock: the marks of one
    micro-batch, the step's end, its read-back and its interval figures (logging every step), in a loop."""
    from bridgetower_mlflow.accelerators.base import BACKWARD_END, FORWARD_END, INPUT_END, INPUT_START, PhaseTiming
    from bridgetower_mlflow.telemetry.sinks import NullSink
    from bridgetower_mlflow.telemetry.steps.step_timing import StepTimingCallback

    timing = StepTimingCallback(NullSink(), PhaseTiming(), lambda: 0.0, WARMUP_STEPS, 1)
    state = argparse.Namespace(global_step=0, max_steps=steps)
    timing.on_train_begin(None, state, None)
    started = time.thread_time()
    for step in range(1, steps + 1):
        for point in (INPUT_START, INPUT_END, FORWARD_END, BACKWARD_END):
            timing.mark(point)
        timing.add_samples(8)
        state.global_step = step
        timing.on_step_end(None, state, None)
    return (time.thread_time() - started) / steps


def run_trial(mode: str, threads: int, options: argparse.Namespace) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "BRIDGETOWER_PROGRESS_SECONDS": "1000",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, __file__, "--trial", mode, "--steps", str(options.steps), "--batch",
                           str(options.batch)], capture_output=True, text=True, env=env, cwd=REPO, timeout=1800)
    if done.returncode:
        raise SystemExit(f"trial {mode} failed: {done.stderr[-2000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if (got["phase_figures"] > 0) != (mode == "on"):
        raise SystemExit(f"trial {mode} reported {got['phase_figures']} phase figures: the switch did not hold")
    return got


def measure(options: argparse.Namespace, settings: list[int]) -> dict[int, dict[str, list[dict]]]:
    """Every pair's trials: {threads: {"on": [...], "off": [...]}}."""
    rates: dict[int, dict[str, list[dict]]] = {threads: {"on": [], "off": []} for threads in settings}
    started = time.monotonic()
    for pair in range(options.pairs):
        spent = time.monotonic() - started
        if pair and spent * (pair + 1) / pair > options.budget:
            print(f"{pair} pairs in {spent:.0f} s: the next would end past the {options.budget:.0f} s budget")
            break
        for threads in settings:
            for mode in (("on", "off") if pair % 2 == 0 else ("off", "on")):
                rates[threads][mode].append(run_trial(mode, threads, options))
            on, off = rates[threads]["on"][-1], rates[threads]["off"][-1]
            print(f"pair {pair + 1} threads {threads}: on {on['samples_per_second']:.2f} off "
                  f"{off['samples_per_second']:.2f} samples/s, on/off "
                  f"{on['samples_per_second'] / off['samples_per_second']:.3f}; CPU per sample on/off "
                  f"{on['cpu_per_sample'] / off['cpu_per_sample']:.3f}", flush=True)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", default="1",
                        help="comma-separated OMP_NUM_THREADS settings, each in every pair (e.g. 1,2: with both "
                             "torch threads on 2 shared cores a trial crawls and resolves nothing)")
    parser.add_argument("--budget", type=float, default=540, help="seconds: no pair starts that would end later")
    parser.add_argument("--smoke", action="store_true", help="one pair of 4-step trials: does it still run?")
    parser.add_argument("--trial", choices=("on", "off"))
    options = parser.parse_args()
    if options.smoke:
        options.pairs, options.steps, options.threads = 1, WARMUP_STEPS + 1, "1"
    if options.trial:
        print(json.dumps(trial(options.trial, options.steps, options.batch)))
        return
    settings = [int(value) for value in options.threads.split(",")]
    cost = per_step_cost(200 if options.smoke else 2000)
    print(f"the breakdown's own work per step (host clock, logging every step): {cost * 1e6:.0f} us of CPU",
          flush=True)
    from bridgetower_mlflow.data.sample import generate_sample_set

    generate_sample_set()
    if not options.smoke:  # the first trial in a cache counts the model's FLOPs: none of the timed ones does
        run_trial("on", settings[0], argparse.Namespace(steps=WARMUP_STEPS + 1, batch=options.batch))
    rates = measure(options, settings)
    medians = {}
    for threads in settings:
        pairs = [on["samples_per_second"] / off["samples_per_second"]
                 for on, off in zip(rates[threads]["on"], rates[threads]["off"], strict=True)]
        cpu = [on["cpu_per_sample"] / off["cpu_per_sample"]
               for on, off in zip(rates[threads]["on"], rates[threads]["off"], strict=True)]
        medians[threads] = statistics.median(pairs)
        rate = statistics.median(r["samples_per_second"] for r in rates[threads]["on"])
        print(f"threads {threads}: median on {rate:.2f} samples/s; median on/off {medians[threads]:.3f} "
              f"(pairs: {', '.join(f'{p:.3f}' for p in pairs)}); CPU per sample on/off {statistics.median(cpu):.3f}; "
              f"the breakdown's own work: {cost * rate / options.batch:.5f} of a step")
    print(f"ratio={min(medians.values()):.3f}")


if __name__ == "__main__":
    main()
