"""Processes as users start them on vendor stacks: the HPU bridge `import torch` autoloads, a broken torchvision."""

from __future__ import annotations

import json

import pytest

from bridgetower_mlflow.accelerators.installed import package_version

from tests.conftest import run_cli
from tests.fakes import BRIDGE

pytestmark = [pytest.mark.slow, pytest.mark.gaudi_stack]


def test_train_sets_the_execution_mode_before_torch_loads_the_bridge(tmp_path, sqlite_uri, cache_dir, monkeypatch):
    """The bridge fixes lazy or eager when it loads; train must have chosen by then, for the path installed."""
    record = tmp_path / "hpu.jsonl"
    monkeypatch.delenv("PT_HPU_LAZY_MODE", raising=False)
    env = {"PYTHONPATH": str(BRIDGE), "FAKE_HPU_COUNT": "1", "FAKE_HPU_RECORD": str(record)}
    done = run_cli(["train", "--accel", "gaudi2", "--max-steps", "4", "--log-model", "false"], env_extra=env,
                   timeout=300)
    events = [json.loads(line) for line in record.read_text().splitlines()]
    loaded = [e for e in events if e["event"] == "bridge_loaded"]
    assert loaded, done.stderr[-2000:]
    lazy = package_version("optimum-habana") is not None  # GaudiTrainer trains lazily, the native path eagerly
    assert (loaded[0]["lazy_env"], loaded[0]["lazy"]) == (("1", True) if lazy else ("0", False))


def test_a_broken_torchvision_does_not_break_a_run_that_does_not_decode_on_the_device(tmp_path, sqlite_uri,
                                                                                    cache_dir):
    from mlflow.tracking import MlflowClient

    from tests.accelerators.test_accel_cuda import broken_torchvision

    folder = broken_torchvision(tmp_path / "site")
    done = run_cli(["train", "--accel", "cpu", "--max-steps", "4", "--log-model", "false",
                    "--per-device-train-batch-size", "8"], env_extra={"PYTHONPATH": str(folder)}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "torchvision is installed but fails to import (RuntimeError" in done.stderr
    (run,) = MlflowClient(sqlite_uri).search_runs(["0"])
    assert run.info.status == "FINISHED"
