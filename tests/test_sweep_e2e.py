"""A real CPU sweep: `python -m bridgetower_mlflow train` per cell, tiny model, real sqlite store."""

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.sweep.command import sweep_command


@pytest.mark.slow
def test_real_cpu_sweep_end_to_end(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "BRIDGETOWER_TRAIN_CMD"):
        monkeypatch.delenv(name, raising=False)
    client = MlflowClient(uri)
    client.create_experiment("e2e", artifact_location=str(tmp_path / "artifacts"))
    result = CliRunner().invoke(sweep_command, [
        "--accel", "cpu", "--workers", "0,1", "--repeats", "1", "--experiment-name", "e2e",
        "--model", "tiny", "--max-steps", "5", "--per-device-train-batch-size", "4",
        "--", "--max-train-samples", "32", "--max-eval-samples", "16", "--log-model", "false"])
    assert result.exit_code == 0, result.output
    experiment_id = client.get_experiment_by_name("e2e").experiment_id
    (parent,) = client.search_runs([experiment_id], "tags.`bridgetower.run_kind` = 'sweep'")
    children = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert sorted(run.info.run_name for run in children) == ["cpu w0 decode=cpu r1", "cpu w1 decode=cpu r1"]
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.tags["bridgetower.run_kind"] == "train"
        assert run.data.metrics["train_samples_per_second"] > 0
    note = client.get_run(parent.info.run_id).data.tags["mlflow.note.content"]
    assert "| w1 decode=cpu |" in note and "model=tiny" in note
    assert "skipped device_decode=true on cpu" in client.get_run(parent.info.run_id).data.tags["sweep.notes"]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "compare")}
    assert {"compare/report.md", "compare/throughput.png", "compare/speedups.csv"} <= artifacts
