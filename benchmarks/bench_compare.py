"""compare over N train-like runs vs one `mlflow.search_runs` over the same runs (sqlite).

Builds (and caches) stores of 1,000 and 10,000 runs that look like train's (~130 params each),
then times both interleaved and repeated. Prints medians, the growth from 1k to 10k, and as the
last line `ratio=<compare / search_runs at 10k>` (the issue's bound is 1.5). Not a test.

    .venv/bin/python benchmarks/bench_compare.py [--repeats 3] [--cache DIR]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic runs tests use

ACCELERATORS = {"a100": 340.0, "h100": 600.0, "gaudi2": 770.0, "gaudi3": 800.0, "cpu": 20.0}
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bridgetower-mlflow-bench"


def build_store(path: Path, count: int) -> str:
    """A sqlite store with `count` train runs (2% FAILED); cached by file name."""
    from mlflow import MlflowClient

    from fakes.synthetic_runs import TrainRunSpec, log_train_run

    uri = f"sqlite:///{path}"
    done = path.with_suffix(".done")
    if done.exists():
        return uri
    path.unlink(missing_ok=True)
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("bench", artifact_location=str(path.parent / f"art-{count}"))
    grid = itertools.cycle(itertools.product(ACCELERATORS, (0, 1, 2), (False, True), (32, 48)))
    started = time.perf_counter()
    for index in range(count):
        accel, workers, decode, batch = next(grid)
        value = ACCELERATORS[accel] * (1 + 0.1 * workers) * (1 + 0.01 * (index % 7))
        status = "FAILED" if index % 50 == 49 else "FINISHED"
        log_train_run(client, experiment_id, TrainRunSpec(
            accel, value, workers, decode and accel != "cpu", batch=batch, status=status, repeat=index))
    print(f"built {count} runs in {time.perf_counter() - started:.0f}s at {path}")
    done.write_text("ok")
    return uri


def time_compare(uri: str, output_dir: Path) -> float:
    from mlflow import MlflowClient

    from bridgetower_mlflow.compare.flow import CompareOptions, run_compare

    started = time.perf_counter()
    run_compare(CompareOptions(experiment_names=("bench",), output_dir=str(output_dir),
                               log_to_mlflow=False), MlflowClient(uri))
    return time.perf_counter() - started


def time_search_runs(uri: str) -> float:
    import mlflow

    mlflow.set_tracking_uri(uri)
    started = time.perf_counter()
    frame = mlflow.search_runs(experiment_names=["bench"])
    assert len(frame) > 0
    return time.perf_counter() - started


def measure(uri: str, repeats: int) -> tuple[float, float]:
    """Medians of interleaved repeats (after one untimed warm-up of each)."""
    compare_times, search_times = [], []
    with tempfile.TemporaryDirectory() as scratch:
        time_compare(uri, Path(scratch)), time_search_runs(uri)
        for _ in range(repeats):
            compare_times.append(time_compare(uri, Path(scratch)))
            search_times.append(time_search_runs(uri))
    return statistics.median(compare_times), statistics.median(search_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    results = {}
    for count in (int(n) for n in args.sizes.split(",")):
        uri = build_store(args.cache / f"runs-{count}.db", count)
        compare_s, search_s = measure(uri, args.repeats)
        results[count] = compare_s
        print(f"{count} runs: compare {compare_s:.2f}s  mlflow.search_runs {search_s:.2f}s  "
              f"ratio {compare_s / search_s:.2f}")
    sizes = sorted(results)
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        print(f"growth {small}->{large} runs: {results[large] / results[small]:.1f}x time for "
              f"{large / small:.0f}x runs")
    print(f"ratio={compare_s / search_s:.3f}")


if __name__ == "__main__":
    main()
