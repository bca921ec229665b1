"""The whole flow against `mlflow server` on PostgreSQL: train, concurrent sweeps, compare, register, promote."""

import os
import subprocess

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import BIN, MlflowServer, no_running_runs, run_cli

pytestmark = pytest.mark.slow
SMALL = ["--max-steps", "4", "--logging-steps", "2", "--per-device-train-batch-size", "8"]


def _sweep(experiment):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    args = [str(BIN / "bridgetower-mlflow"), "sweep", "--accel", "cpu", "--workers", "0,1", "--repeats", "1",
            "--experiment-name", experiment, "--max-steps", "4", "--per-device-train-batch-size", "8",
            "--", "--log-model", "false", "--max-eval-samples", "16"]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_full_flow_on_postgres_with_concurrent_sweeps(cache_dir, postgres, tmp_path, monkeypatch):
    server = MlflowServer(postgres.uri, tmp_path / "artifacts").start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    client = MlflowClient(server.url)
    try:
        sweeps = [_sweep("pg-sweep-a"), _sweep("pg-sweep-b")]  # two sweeps writing at once
        for accuracy_run in range(2):
            done = run_cli(["train", *SMALL, "--experiment-name", "pg-train", "--register-as", "bt-pg",
                            "--seed", str(accuracy_run)])
            assert done.returncode == 0, done.stderr[-3000:]
        for sweep in sweeps:
            out, err = sweep.communicate(timeout=900)
            assert sweep.returncode == 0, err[-3000:]
        for name in ("pg-sweep-a", "pg-sweep-b"):
            experiment = client.get_experiment_by_name(name).experiment_id
            runs = client.search_runs([experiment], "tags.`bridgetower.run_kind` = 'train'")
            assert sorted(r.data.params["dataloader_num_workers"] for r in runs) == ["0", "1"]
            assert all(r.info.status == "FINISHED" and r.data.tags.get("mlflow.parentRunId") for r in runs)
        compared = run_cli(["compare", "--experiment-name", "pg-sweep-a", "--experiment-name", "pg-sweep-b"])
        assert compared.returncode == 0, compared.stderr[-3000:]
        assert "w1 decode=cpu" in compared.stdout
        promoted = run_cli(["promote", "--model-name", "bt-pg", "--candidate", "1"])
        assert promoted.returncode == 0, promoted.stderr[-2000:]
        assert client.get_registered_model("bt-pg").aliases == {"champion": "1"}
        again = run_cli(["promote", "--model-name", "bt-pg", "--metric", "eval_loss"])  # candidate: latest (2)
        assert again.returncode == 0, again.stderr[-2000:]
        losses = {v: float(client.get_model_version("bt-pg", v).tags["eval_loss"]) for v in ("1", "2")}
        expected = "2" if losses["2"] < losses["1"] else "1"  # lower is better for losses
        assert client.get_registered_model("bt-pg").aliases == {"champion": expected}, (losses, again.stdout)
        verb = "now holds @champion (was version 1)" if expected == "2" else "@champion stays on version 1"
        assert verb in again.stdout and client.get_model_version("bt-pg", "2").tags["promotion.previous_version"] == "1"
        assert no_running_runs(server.url) == []
    finally:
        server.stop()
