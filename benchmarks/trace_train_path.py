"""How far the train options travel from the CLI to the trainer: the project calls that receive the run's
TrainConfig before transformers' `Trainer.train` starts, in a real `train`, read with a profiler hook.

    python benchmarks/trace_train_path.py            # a tiny CPU run on a throwaway sqlite store

Prints, in call order, each call taking the options that crosses into another project module (a "stop"),
then the totals:
stops, distinct modules, climbs (a stop into a module of a higher import-linter layer than the one the
flow was in: the reader goes back up the tree), and the modules entered most often.
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "bridgetower_mlflow"


def layer_of() -> dict[str, int]:
    """Module prefix -> layer index (0 = top) from pyproject's layers contract."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    return {name.strip(): index for index, row in enumerate(layers) for name in row.split("|")}


def layer(module: str, layers: dict[str, int]) -> int:
    while module and module not in layers:
        module = module.rpartition(".")[0]
    return layers.get(module, len(layers))


def trace(argv: list[str]) -> list[tuple[str, str]]:
    """(module, function) of every project call given the TrainConfig, on the main thread, until Trainer.train."""
    from bridgetower_mlflow.config import TrainConfig

    calls: list[tuple[str, str]] = []

    class Reached(Exception):
        pass

    def profile(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        code = frame.f_code
        if module.startswith(PACKAGE):
            names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
            arguments = [frame.f_locals.get(name) for name in names]
            if any(isinstance(value, TrainConfig) for value in arguments):
                calls.append((module, code.co_name))
        elif code.co_name == "train" and module.startswith("transformers.trainer"):
            raise Reached

    from bridgetower_mlflow.cli import main

    sys.setprofile(profile)
    try:
        main.main(argv, standalone_mode=False)
    except Reached:
        pass
    finally:
        sys.setprofile(None)
    return calls


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="trace-train-") as folder:
        scratch = Path(folder)
        os.environ.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{scratch / 'mlflow.db'}")
        calls = trace(["train", "--max-steps", "5", "--per-device-train-batch-size", "8", "--dataloader-num-workers",
                       "0", "--log-model", "false", "--output-dir", str(scratch / "out")])
    layers = layer_of()
    stops, climbs, previous = [], 0, None
    for module, function in calls:
        if module == previous:
            continue
        if previous is not None and layer(module, layers) < layer(previous, layers):
            climbs += 1
        stops.append((module, function))
        previous = module
    for module, function in stops:
        print(f"  {module.removeprefix(PACKAGE + '.')}.{function}")
    entered = collections.Counter(module for module, _ in stops)
    often = ", ".join(f"{m.removeprefix(PACKAGE + '.')} x{n}" for m, n in entered.most_common(5))
    print(f"stops: {len(stops)} in {len(entered)} modules, {climbs} climbs back up a layer; most entered: {often}")


if __name__ == "__main__":
    main()
