"""Does evaluating during training change train_samples_per_second? Side by side through the CLI.

Interleaved `bridgetower-mlflow train` runs (tiny preset, CPU) without and with `--eval-steps`, the same steps;
each run's train_samples_per_second read back from its store. Prints the medians, what the with-evaluations runs
would have reported with the evaluations left in the window (their samples over the window's seconds plus
`train_window_eval_seconds`), and `ratio=` with / without (1.0 = evaluations cost training nothing). No round
starts that would end past `--budget` seconds (the first always runs).

    .venv/bin/python benchmarks/bench_eval_throughput.py [--rounds 3] [--steps 40] [--eval-steps 5] [--budget 540]
        [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def train(folder: Path, name: str, args: argparse.Namespace, eval_steps: int) -> dict[str, float]:
    """One run into `folder`'s store; its final metrics."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    command = [str(BIN / "bridgetower-mlflow"), "train", "--max-steps", str(args.steps), "--eval-steps",
               str(eval_steps), "--max-eval-samples", str(args.max_eval_samples), "--per-device-train-batch-size",
               "16", "--dataloader-num-workers", "0", "--max-seq-length", "32", "--throughput-warmup-steps", "3",
               "--log-model", "false", "--experiment-name", name, "--output-dir", str(folder / "outputs")]
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PATH": f"{BIN}:{os.environ['PATH']}"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=folder)
    if done.returncode:
        raise SystemExit(f"train failed ({done.returncode}): {done.stderr[-2000:]}")
    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name(name).experiment_id], max_results=1,
                                order_by=["attributes.start_time DESC"])
    return run.data.metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-steps", type=int, default=5)
    parser.add_argument("--max-eval-samples", type=int, default=0, help="rows each evaluation scores (0: all)")
    parser.add_argument("--budget", type=float, default=540, help="seconds: no round starts that would end later")
    parser.add_argument("--smoke", action="store_true", help="one round of 5-step runs: does it still run?")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.steps, args.eval_steps, args.max_eval_samples = 1, 5, 2, 8
    without, with_evals, evals_in = [], [], []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as scratch:
        for round_ in range(args.rounds):
            spent = time.monotonic() - started
            if round_ and spent * (round_ + 1) / round_ > args.budget:
                print(f"{round_} rounds in {spent:.0f} s: the next would end past the {args.budget:.0f} s budget")
                break
            order = [0, args.eval_steps] if round_ % 2 == 0 else [args.eval_steps, 0]  # neither always goes first
            for eval_steps in order:
                metrics = train(Path(scratch), f"r{round_}e{eval_steps}", args, eval_steps)
                rate = metrics["train_samples_per_second"]
                if eval_steps:
                    with_evals.append(rate)
                    seconds = metrics["train_steady_state_seconds"]
                    evals_in.append(rate * seconds / (seconds + metrics["train_window_eval_seconds"]))
                else:
                    without.append(rate)
                print(f"round {round_}: eval_steps {eval_steps:2d}: {rate:8.2f} samples/s", flush=True)
    base, evaluated, naive = (statistics.median(v) for v in (without, with_evals, evals_in))
    print(f"median samples/s: without evaluations {base:.2f}, with every {args.eval_steps} steps {evaluated:.2f} "
          f"(with the evaluations left in the window it would read {naive:.2f}, {naive / base:.2f}x)")
    print(f"ratio={evaluated / base:.3f}")


if __name__ == "__main__":
    main()
