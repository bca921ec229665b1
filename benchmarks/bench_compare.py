"""compare over N train-like runs vs one `mlflow.search_runs` over the same runs (sqlite).

Builds stores of 1,000 and 10,000 runs that look like train's (tests/fakes/synthetic_runs.py: ~130 params each,
2% FAILED) once, then times both interleaved and repeated. A store is cached in the project's cache folder under
a key of its recipe (the run count, the builder's code, the runs' contents, MLflow's version), so a second run
reuses it and a changed recipe builds afresh (the stale store is removed). It is built on /dev/shm where there is
room (the build is ~12 sqlite commits a run: on tmpfs they cost no disk flush), then moved into the cache. Prints
each store's build time, medians, the growth from 1k to 10k, and as the last line
`ratio=<compare / search_runs at the largest size>` (the bound is 1.5). Not a test.

    .venv/bin/python benchmarks/bench_compare.py [--repeats 3] [--sizes 1000,10000] [--cache DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import itertools
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic runs tests use

ACCELERATORS = {"a100": 340.0, "h100": 600.0, "gaudi2": 770.0, "gaudi3": 800.0, "cpu": 20.0}
RUN_BYTES = 60_000  # a run's share of the sqlite file, with room to spare (~40 kB measured)


def run_specs(count: int):
    """The store's runs, in order: the grid's cells in turn, their values spread by repeat, 2% FAILED."""
    from fakes.synthetic_runs import TrainRunSpec

    grid = itertools.cycle(itertools.product(ACCELERATORS, (0, 1, 2), (False, True), (32, 48)))
    for index in range(count):
        accel, workers, decode, batch = next(grid)
        value = ACCELERATORS[accel] * (1 + 0.1 * workers) * (1 + 0.01 * (index % 7))
        status = "FAILED" if index % 50 == 49 else "FINISHED"
        yield TrainRunSpec(accel, value, workers, decode and accel != "cpu", batch=batch, status=status,
                           repeat=index)


def recipe_key(count: int) -> str:
    """What the store holds: the count, this builder, one grid cycle of run contents, MLflow's version."""
    import mlflow
    from fakes.synthetic_runs import evaluation_history, train_run_contents

    specs = list(itertools.islice(run_specs(count), 120))
    recipe = {"count": count, "mlflow": mlflow.__version__,
              "builder": inspect.getsource(run_specs) + inspect.getsource(fill_share),
              "runs": [[train_run_contents(spec), evaluation_history(spec)] for spec in specs]}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:12]


def fill_share(uri: str, experiment_id: str, count: int, share: int, shares: int) -> None:
    """Every `shares`-th run of the store, from the `share`-th on."""
    from fakes.synthetic_runs import log_train_run
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    for spec in itertools.islice(run_specs(count), share, None, shares):
        log_train_run(client, experiment_id, spec)


def fill_store(uri: str, count: int, artifacts: Path) -> None:
    """The store's runs, by a writer a core from 1,000 runs on (sqlite takes one write at a time; the writers'
    Python, most of a run's ~80 ms of CPU, runs side by side)."""
    from mlflow import MlflowClient

    experiment_id = MlflowClient(uri).create_experiment("bench", artifact_location=str(artifacts))
    shares = min(os.cpu_count() or 1, 4) if count >= 1000 else 1
    if shares == 1:
        return fill_share(uri, experiment_id, count, 0, 1)
    with ProcessPoolExecutor(shares, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(fill_share, *zip(*[(uri, experiment_id, count, share, shares) for share in range(shares)])))
    return None


def build_folder(count: int) -> Path | None:
    """A tmpfs folder with room for the store, else None (build in place)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2 * count * RUN_BYTES:
        return Path(tempfile.mkdtemp(prefix="bench-compare-", dir=shm))
    return None


def cached_store(cache: Path, count: int) -> str:
    """The store's URI: the cached one of this recipe, else built (and the other recipes' removed)."""
    key = recipe_key(count)
    path, facts = cache / f"runs-{count}-{key}.db", cache / f"runs-{count}-{key}.json"
    if path.exists() and facts.exists():
        built = json.loads(facts.read_text())
        print(f"{count} runs: the cached store {path} (built {built['date']} in {built['seconds']:.0f} s)")
        return f"sqlite:///{path}"
    for stale in cache.glob(f"runs-{count}-*"):
        stale.unlink()
    started = time.perf_counter()
    scratch = build_folder(count)
    building = (scratch or cache) / f"runs-{count}-{key}.partial"
    try:
        fill_store(f"sqlite:///{building}", count, cache / f"art-{count}")
        if scratch is not None:
            shutil.move(building, path.with_suffix(".partial"))
        os.replace(path.with_suffix(".partial"), path)  # whole or absent
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.perf_counter() - started
    facts.write_text(json.dumps({"seconds": seconds, "date": time.strftime("%Y-%m-%d"), "on": str(scratch or cache)}))
    print(f"{count} runs: built in {seconds:.0f} s ({1000 * seconds / count:.0f} ms a run, on "
          f"{'tmpfs' if scratch else 'disk'}), cached at {path}")
    return f"sqlite:///{path}"


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
    parser.add_argument("--cache", type=Path, help="where the stores are kept (default: the project's cache folder)")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--smoke", action="store_true", help="one repeat over 40 runs: does it still run?")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.sizes = 1, "40"
    if args.cache is None:
        from bridgetower_mlflow.data.sample import default_sample_dir

        args.cache = default_sample_dir().parent / "bench-compare"
    args.cache.mkdir(parents=True, exist_ok=True)
    results = {}
    for count in (int(n) for n in args.sizes.split(",")):
        uri = cached_store(args.cache, count)
        compare_s, search_s = measure(uri, args.repeats)
        results[count] = compare_s
        print(f"{count} runs: compare {compare_s:.2f}s  mlflow.search_runs {search_s:.2f}s  "
              f"ratio {compare_s / search_s:.2f}", flush=True)
    sizes = sorted(results)
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        print(f"growth {small}->{large} runs: {results[large] / results[small]:.1f}x time for "
              f"{large / small:.0f}x runs")
    print(f"ratio={compare_s / search_s:.3f}")


if __name__ == "__main__":
    main()
