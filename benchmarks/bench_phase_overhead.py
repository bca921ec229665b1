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
    """One training (inside a trial process); prints its samples/s and the CPU time (all of the process's
    threads) per trained sample while it fitted, as JSON."""
    import time

    import bridgetower_mlflow.train.flow as flow
    import bridgetower_mlflow.train.trainer as trainer_module
    from bridgetower_mlflow.config import build_train_config

    if mode == "off":
        trainer_module.with_step_marks = lambda base: base  # the benchmark's own switch
        trainer_module._phase_timing = lambda prepared: None
    probe = [0.0, []]  # CPU seconds of this step so far, each step's (an upper bound: the probes cost too)
    if mode == "on":
        _probe_breakdown(probe)
    fitting = flow.fit
    spent = []

    def timed_fit(*args, **kwargs):
        started = time.process_time()
        try:
            return fitting(*args, **kwargs)
        finally:
            spent.append(time.process_time() - started)

    flow.fit = timed_fit
    with tempfile.TemporaryDirectory() as output_dir:
        config = build_train_config(max_steps=steps, logging_steps=1, per_device_train_batch_size=batch,
                                    dataloader_num_workers=0, log_model=False, max_eval_samples=4,
                                    max_seq_length=32, throughput_warmup_steps=3, output_dir=output_dir)
        result = flow.train(config, tracked=False)
    print(json.dumps({"samples_per_second": result.metrics["train_samples_per_second"],
                      "cpu_per_sample": spent[0] / (steps * batch),
                      "breakdown_cpu_per_step": statistics.median(probe[1][3:]) if probe[1][3:] else 0.0}))


def _probe_breakdown(probe: list) -> None:
    """Count, on the calling thread's CPU clock, what the step-timing callback's step end and marks spend."""
    import time

    from bridgetower_mlflow.telemetry.steps.step_timing import StepTimingCallback

    for name in ("on_step_end", "mark", "add_samples"):
        method = getattr(StepTimingCallback, name)

        def timed(self, *args, _method=method, _name=name, **kwargs):
            started = time.thread_time()
            try:
                return _method(self, *args, **kwargs)
            finally:
                probe[0] += time.thread_time() - started
                if _name == "on_step_end":  # the step's marks and its end: one figure per step
                    probe[1].append(probe[0])
                    probe[0] = 0.0

        setattr(StepTimingCallback, name, timed)


def per_step_cost(steps: int = 2000) -> float:
    """Seconds of the calling thread's CPU the breakdown adds to one step on the host clock: the marks of one
    micro-batch, the step's end, its read-back and its interval figures (logging every step), in a loop."""
    import time

    from bridgetower_mlflow.accelerators.base import BACKWARD_END, FORWARD_END, INPUT_END, INPUT_START, PhaseTiming
    from bridgetower_mlflow.telemetry.sinks import NullSink
    from bridgetower_mlflow.telemetry.steps.step_timing import StepTimingCallback

    timing = StepTimingCallback(NullSink(), PhaseTiming(), lambda: 0.0, 3, 1)
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


def run_trial(mode: str, threads: int, options: argparse.Namespace, cache: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "BRIDGETOWER_MLFLOW_CACHE": cache,
           "BRIDGETOWER_PROGRESS_SECONDS": "1000", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, __file__, "--trial", mode, "--steps", str(options.steps), "--batch",
                           str(options.batch)], capture_output=True, text=True, env=env, cwd=REPO, timeout=1800)
    if done.returncode:
        raise SystemExit(f"trial {mode} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


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
    cost = per_step_cost()
    print(f"the breakdown's own work per step (host clock, logging every step): {cost * 1e6:.0f} us of CPU",
          flush=True)
    rates: dict[int, dict[str, list[dict]]] = {threads: {"on": [], "off": []} for threads in settings}
    with tempfile.TemporaryDirectory() as cache:
        from bridgetower_mlflow.data.sample import generate_sample_set

        os.environ["BRIDGETOWER_MLFLOW_CACHE"] = cache
        generate_sample_set()
        run_trial("on", settings[0], argparse.Namespace(steps=4, batch=options.batch), cache)  # caches FLOPs
        for pair in range(options.pairs):
            for threads in settings:
                for mode in (("on", "off") if pair % 2 == 0 else ("off", "on")):
                    rates[threads][mode].append(run_trial(mode, threads, options, cache))
                on, off = rates[threads]["on"][-1], rates[threads]["off"][-1]
                print(f"pair {pair + 1} threads {threads}: on {on['samples_per_second']:.2f} off "
                      f"{off['samples_per_second']:.2f} samples/s, on/off "
                      f"{on['samples_per_second'] / off['samples_per_second']:.3f}; CPU per sample on/off "
                      f"{on['cpu_per_sample'] / off['cpu_per_sample']:.3f}", flush=True)
    medians = {}
    for threads in settings:
        pairs = [on["samples_per_second"] / off["samples_per_second"]
                 for on, off in zip(rates[threads]["on"], rates[threads]["off"], strict=True)]
        cpu = [on["cpu_per_sample"] / off["cpu_per_sample"]
               for on, off in zip(rates[threads]["on"], rates[threads]["off"], strict=True)]
        medians[threads] = statistics.median(pairs)
        rate = statistics.median(r["samples_per_second"] for r in rates[threads]["on"])
        inside = statistics.median(r["breakdown_cpu_per_step"] for r in rates[threads]["on"])
        print(f"threads {threads}: inside real training the breakdown's callback and marks took {inside * 1e6:.0f} us "
              f"of CPU per step (probed; median step past the warmup), {inside * rate / options.batch:.5f} of a step")
        print(f"threads {threads}: median on {rate:.2f} samples/s; median on/off {medians[threads]:.3f} "
              f"(pairs: {', '.join(f'{p:.3f}' for p in pairs)}); CPU per sample on/off {statistics.median(cpu):.3f}; "
              f"the breakdown's own work: {cost * rate / options.batch:.5f} of a step")
    print(f"ratio={min(medians.values()):.3f}")


if __name__ == "__main__":
    main()
