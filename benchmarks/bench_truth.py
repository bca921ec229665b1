"""Every figure a run logs against the truth observer: reported / observed for each figure and configuration.

Runs the truth harness's configurations (tests/truth_harness.py: real `bridgetower-mlflow train` runs on the CPU,
tiny preset, watched from inside the libraries and from /proc) and prints one table per configuration, then the
ratio furthest from 1 over the rates, seconds, counts and CPU figures last as `ratio=` (the loader wait fraction
is judged absolutely, within 0.05: its largest difference is printed before). `--product DIR` runs the product
of another checkout (e.g. a `git worktree` of main) under the same observer: the before of a before/after.

    .venv/bin/python benchmarks/bench_truth.py --configs ga-remainder epochs two-ranks resume
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from truth_harness import CONFIGS, run_observed

DEFAULT = ("ga-remainder", "resume", "epochs", "two-ranks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(DEFAULT), choices=sorted(CONFIGS))
    parser.add_argument("--product", help="a checkout whose bridgetower_mlflow the runs import instead of this one")
    options = parser.parse_args()
    if options.product:  # the train subprocesses inherit it; the observer's own code stays this checkout's
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [options.product, os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("BRIDGETOWER_MLFLOW_CACHE", tempfile.mkdtemp(prefix="bench-truth-cache-"))
    from bridgetower_mlflow.data.sample import generate_sample_set

    generate_sample_set()
    worst, worst_wait = 1.0, 0.0
    with tempfile.TemporaryDirectory(prefix="bench-truth-") as root:
        for name in options.configs:
            observed = run_observed(CONFIGS[name], Path(root))
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
