"""Shared fixtures for the promotion tests (and tests/model/test_model_serving.py, which imports them): a real
sqlite store with real tiny models.

Two "trained" runs each log the project's real pyfunc (a random-init tiny BridgeTower) with eval
metrics, as `train` does; tests register versions of them under their own model name.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

EVAL_FINGERPRINT = "c8cf8c869ecd855d"
WORSE = {"eval_caption_match_accuracy": 0.25, "eval_loss": 2.0, "eval_recall_at_1": 0.1}
BETTER = {"eval_caption_match_accuracy": 0.5, "eval_loss": 1.5, "eval_recall_at_1": 0.2}
_names = itertools.count(1)


@dataclass
class TrainedRun:
    run_id: str
    model_info: object
    metrics: dict


@dataclass
class Store:
    uri: str
    folder: Path
    worse: TrainedRun
    better: TrainedRun


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, cache_dir):
    """A saved random-init tiny model (save_pretrained + inference settings), as `train` saves it."""
    from bridgetower_mlflow.model.checkpoint import save_checkpoint
    from bridgetower_mlflow.model.load import load_model

    return save_checkpoint(load_model("tiny", 128, 0), tmp_path_factory.mktemp("checkpoint") / "final-model", 128)


def log_trained_run(checkpoint: Path, metrics: dict) -> TrainedRun:
    """A run with eval metrics and the logged pyfunc, like the end of `train`."""
    import mlflow

    from bridgetower_mlflow.model.publish import log_pyfunc_model

    with mlflow.start_run() as run:
        mlflow.set_tags({"dataset.eval_fingerprint": EVAL_FINGERPRINT, "dataset": "sample"})
        mlflow.log_metrics(metrics, step=1)
        info = log_pyfunc_model(checkpoint, step=1)
    return TrainedRun(run.info.run_id, info, metrics)


@pytest.fixture(scope="module")
def module_store(tmp_path_factory, tiny_checkpoint):
    """A fresh sqlite store (artifacts beside it) holding the two runs, shared by one test module."""
    folder = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{folder}/mlflow.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)  # the default experiment's artifacts go to ./mlruns
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        mp.delenv("MLFLOW_RUN_ID", raising=False)
        return Store(uri, folder, log_trained_run(tiny_checkpoint, WORSE), log_trained_run(tiny_checkpoint, BETTER))


@pytest.fixture
def store(module_store, monkeypatch):
    """MLFLOW_TRACKING_URI -> the module's store for this test (conftest clears it for every test)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", module_store.uri)
    return module_store


def register(name: str, run: TrainedRun, **tag_overrides) -> str:
    """A version of the run's model tagged as `train --register-as` tags it; None drops a tag."""
    from mlflow.tracking import MlflowClient

    from bridgetower_mlflow.model.publish import register_version

    tags = {"run_id": run.run_id, "dataset": "sample", "dataset.eval_fingerprint": EVAL_FINGERPRINT,
            **{key: f"{value:.6g}" for key, value in run.metrics.items()}}
    tags.update({k.replace("__", "."): v for k, v in tag_overrides.items()})
    tags = {k: v for k, v in tags.items() if v is not None}
    return str(register_version(MlflowClient(), run.model_info, name, tags, "test version").version)


def unique_name(prefix: str = "bt") -> str:
    return f"{prefix}-{next(_names)}"


def registry_snapshot(name: str) -> dict:
    """Everything promotion may change: aliases, description, every version's tags."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    model = client.get_registered_model(name)
    versions = client.search_model_versions(f"name = '{name}'")
    return {"aliases": dict(model.aliases), "description": model.description,
            "tags": {v.version: dict(v.tags) for v in versions}}
