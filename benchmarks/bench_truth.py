"""Every figure a run logs against the truth observer: reported / observed for each figure and configuration.

Runs the truth harness's configurations (tests/truth/truth_harness.py: real `bridgetower-mlflow train` runs on the CPU,
tiny preset, watched from inside the libraries and from /proc) and prints one table per configuration, then the
ratio furthest from 1 over the rates, seconds, counts and CPU figures last as `ratio=` (the loader wait fraction
is judged absolutely, within 0.05: its largest difference is printed before). `--product DIR` runs the product
of another checkout (e.g. a `git worktree` of main) under the same observer: the before of a before/after.
Without BRIDGETOWER_MLFLOW_CACHE set the runs get a fresh cache (sample set, tokenizer, FLOP count), removed after.

    .venv/bin/python benchmarks/bench_truth.py [--configs ga-remainder epochs two-ranks resume] [--product DIR]
        [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, whose tests/ package holds the harness

from tests.truth.truth_harness import CONFIGS, ONE_THREAD, SEQ_LEN, Config, run_observed

DEFAULT = ("ga-remainder", "resume", "epochs", "two-ranks")
# three steps, one of them warmup, no worker, no evaluation but the last: the harness and this script still run
SMOKE = Config("smoke", ("--per-device-train-batch-size", "8", "--throughput-warmup-steps", "1",
                         "--dataloader-num-workers", "0", "--max-seq-length", str(SEQ_LEN), "--logging-steps", "1",
                         "--log-model", "false", "--max-steps", "3", "--max-eval-samples", "8"), 1, ONE_THREAD)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(DEFAULT), choices=sorted(CONFIGS))
    parser.add_argument("--product", help="a checkout whose bridgetower_mlflow the runs import instead of this one")
    parser.add_argument("--smoke", action="store_true", help="one 3-step run: does it still run?")
    options = parser.parse_args()
    if options.product:  # the train subprocesses inherit it; the observer's own code stays this checkout's
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [options.product, os.environ.get("PYTHONPATH")]))
    configs = [SMOKE] if options.smoke else [CONFIGS[name] for name in options.configs]
    with contextlib.ExitStack() as stack:
        if "BRIDGETOWER_MLFLOW_CACHE" not in os.environ:
            cache = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-truth-cache-"))
            os.environ["BRIDGETOWER_MLFLOW_CACHE"] = cache
        measure(configs)


def measure(configs: list[Config]) -> None:
    from bridgetower_mlflow.data.sample import generate_sample_set

    generate_sample_set()
    worst, worst_wait = 1.0, 0.0
    with tempfile.TemporaryDirectory(prefix="bench-truth-") as root:
        for config in configs:
            name, observed = config.name, run_observed(config, Path(root))
            print(f"\n{name}  (batches per step: {observed.batches_per_step()})")
            for check in observed.checks:
                print("  " + check.line())
                if check.figure == "loader wait fraction":
                    worst_wait = max(worst_wait, abs((check.reported or 0) - check.observed))
                elif abs(check.ratio - 1) > abs(worst - 1):  # an absent figure: inf
                    worst = check.ratio
    print(f"\nloader wait fraction: largest |reported - observed| = {worst_wait:.4f} (allowed 0.05)")
    print(f"ratio={worst:.4f}")


if __name__ == "__main__":
    main()
