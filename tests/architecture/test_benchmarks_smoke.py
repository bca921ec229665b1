"""The benchmarks cannot rot: each runs in its smoke mode as a real subprocess and prints its `ratio=` line, and
none reaches into the product past its public seams (no private name imported, read or patched; no product
module or class patched), so the next refactor that breaks one is red here, not found months later."""

from __future__ import annotations

import ast
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = next(folder for folder in Path(__file__).resolve().parents if (folder / "benchmarks").is_dir())
BENCHMARKS = REPO / "benchmarks"
PRODUCT = "bridgetower_mlflow"
# each script's smoke arguments, the heaviest first (two run side by side: the machine has two cores)
SMOKES = {
    "bench_eval_throughput.py": ["--smoke"],  # two CLI trainings
    "bench_truth.py": ["--smoke"],  # one CLI training under the observer
    "bench_tracking_overhead.py": ["--smoke"],  # two trainings, each in its own process
    "bench_phase_overhead.py": ["--smoke"],
    "bench_loader_wait.py": ["--smoke"],
    "trace_train_path.py": [],  # stops where training would start
    "bench_compare.py": ["--smoke"],
    "bench_monitor_priority.py": ["--smoke"],
    "bench_loader_capacity.py": ["--smoke"],
    "bench_image_pipeline.py": ["--smoke"],
    "bench_image_backends.py": ["--smoke"],
}
RATIO = re.compile(r"ratio=(\S+)")
STOPS = re.compile(r"^stops: (\d+) in (\d+) modules, (\d+) climbs", re.MULTILINE)
TIMEOUT_S = 600  # one smoke on two loaded cores; far beyond it is a hang


def scripts() -> list[str]:
    """Every runnable script in benchmarks/ (the helper modules they import are not)."""
    return sorted(path.name for path in BENCHMARKS.glob("*.py") if "__main__" in path.read_text(encoding="utf-8"))


def _run(script: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *SMOKES[script]], capture_output=True,
                          text=True, env=env, cwd=BENCHMARKS, timeout=TIMEOUT_S)
    return done, time.monotonic() - started


@pytest.fixture(scope="module")
def smoked(cache_dir) -> dict[str, tuple[subprocess.CompletedProcess, float]]:
    """Every benchmark's smoke run: its process and its seconds."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MLFLOW_")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               BRIDGETOWER_MLFLOW_CACHE=str(cache_dir), HF_HUB_OFFLINE="1")
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(SMOKES, pool.map(lambda script: _run(script, env), SMOKES)))
    print("benchmark smokes: " + ", ".join(f"{script} {seconds:.0f} s" for script, (_, seconds) in runs.items()))
    return runs


def test_every_benchmark_has_a_smoke():
    assert scripts() == sorted(SMOKES)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the first test to ask for the smokes waits for all of them
@pytest.mark.parametrize("script", [name for name in SMOKES if name != "trace_train_path.py"])
def test_the_smoke_prints_a_ratio(smoked, script):
    done, seconds = smoked[script]
    tail = f"{script} ({seconds:.0f} s):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, tail
    last = done.stdout.strip().splitlines()[-1]
    found = RATIO.fullmatch(last)
    assert found, f"last line {last!r}: {tail}"
    ratio = float(found.group(1))
    assert math.isfinite(ratio) and ratio > 0, tail


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_train_path_trace_lists_its_stops(smoked):
    done, seconds = smoked["trace_train_path.py"]
    tail = f"({seconds:.0f} s):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, tail
    found = STOPS.search(done.stdout)
    assert found, tail
    stops, modules, _ = (int(value) for value in found.groups())
    assert stops >= 5 and modules >= 3, tail  # the trace stopped at training's start, not before the flow began
    assert "  train.flow.train" in done.stdout, tail
    assert "step 1/" not in done.stdout + done.stderr, tail  # and did not train


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.Assign, ast.Delete)):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    else:
        return []
    flat = []
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets.extend(target.elts)
        else:
            flat.append(target)
    return flat


def reaches_past_the_seams(source: str) -> list[str]:
    """Where `source` imports, reads or patches a private name, or patches a module or class of the product."""
    tree, found, product = ast.parse(source), [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if any(_private(part) for part in alias.name.split(".")):
                    found.append(f"line {node.lineno}: import {alias.name}")
                if alias.name.split(".")[0] == PRODUCT:
                    product.add(alias.asname or PRODUCT)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                if any(_private(part) for part in [*module.split("."), alias.name]):
                    found.append(f"line {node.lineno}: from {module} import {alias.name}")
            if module.split(".")[0] == PRODUCT:
                product.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                and _root(node.func) in ("getattr", "setattr", "hasattr", "delattr") \
                and _private(str(node.args[1].value)):
            found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PRODUCT + ".") \
                and any(_private(part) for part in node.value.split(".")):
            found.append(f"line {node.lineno}: {node.value!r}")
    for node in ast.walk(tree):
        patched = [target for target in _targets(node) if isinstance(target, ast.Attribute)]
        if isinstance(node, ast.Call) and _root(node.func) in ("setattr", "delattr") and node.args:
            patched.append(node.args[0])
        found += [f"line {node.lineno}: {ast.unparse(target)} patched" for target in patched
                  if _root(target) in product]
    return found


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda path: path.name)
def test_no_benchmark_reaches_past_the_public_seams(path):
    assert reaches_past_the_seams(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("source", [
    "from bridgetower_mlflow.telemetry import throughput\nthroughput.ThroughputCallback._open_window = None",
    "from bridgetower_mlflow.telemetry.steps.throughput import ThroughputCallback\nx = ThroughputCallback._rows",
    "from bridgetower_mlflow.train.trainer import _phase_timing",
    "import bridgetower_mlflow.train.trainer as trainer_module\ntrainer_module.with_step_marks = lambda base: base",
    "from bridgetower_mlflow.data import cpu_images\ncpu_images.BACKEND, other = 'pillow', 1",
    "from bridgetower_mlflow.tracking.metric_buffer import MetricBuffer\nsetattr(MetricBuffer, 'start', None)",
    "from truth_harness import _options",
    "import unittest.mock\nunittest.mock.patch('bridgetower_mlflow.train.flow._train')",
])
def test_the_seam_check_sees_what_rotted_before(source):
    assert reaches_past_the_seams(source) != []
