"""A real CPU sweep: `python -m bridgetower_mlflow train` per cell, tiny model, real sqlite store."""

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.sweep.command import sweep_command


@pytest.mark.slow
def test_real_cpu_sweep_end_to_end(tmp_path, monkeypatch):
    """Strategy x devices axes: fast_ddp skipped on CPU, one child per device count (two ranks through torchrun),
    compare puts them in one section with the scaling table."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "BRIDGETOWER_TRAIN_CMD"):
        monkeypatch.delenv(name, raising=False)
    client = MlflowClient(uri)
    client.create_experiment("e2e", artifact_location=str(tmp_path / "artifacts"))
    result = CliRunner().invoke(sweep_command, [
        "--accel", "cpu", "--workers", "1", "--distribution-strategy", "ddp,fast_ddp",
        "--per-device-train-batch-size", "4", "--devices", "1,2", "--repeats", "1", "--experiment-name", "e2e",
        "--model", "tiny", "--max-steps", "2", "--image-backend", "study",
        "--", "--max-train-samples", "32", "--max-eval-samples", "16", "--log-model", "false",
        "--throughput-warmup-steps", "1"])
    assert result.exit_code == 0, result.output
    names = ["cpu w1 decode=cpu ddp d1 r1", "cpu w1 decode=cpu ddp d2 r1"]
    lines = result.output.splitlines()
    assert lines.index(f"[1/2] starting {names[0]}") < lines.index(f"[2/2] starting {names[1]}")
    assert any(line.startswith(f"[2/2] {names[1]}: ") and line.endswith("(FINISHED), 0 left") for line in lines)
    assert "note: skipped distribution_strategy=fast_ddp on cpu: the cpu adapter has no fast_ddp " \
           "(2 cells not run, not faked)" in lines
    experiment_id = client.get_experiment_by_name("e2e").experiment_id
    (parent,) = client.search_runs([experiment_id], "tags.`bridgetower.run_kind` = 'sweep'")
    children = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert sorted(run.info.run_name for run in children) == names
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.tags["bridgetower.run_kind"] == "train"
        assert run.data.metrics["train_samples_per_second"] > 0
        params = run.data.params
        assert (params["distribution_strategy"], params["dataloader_num_workers"], params["image_backend"]) == (
            "ddp", "1", "study")
        assert run.data.tags["accelerator.count"] == run.info.run_name.split()[-2][1:]  # what ran, not what was asked
    tags = client.get_run(parent.info.run_id).data.tags
    assert (tags["sweep.distribution_strategy"], tags["sweep.devices"]) == ("ddp,fast_ddp", "1,2")
    assert "skipped device_decode=true on cpu" in tags["sweep.notes"]
    assert "skipped distribution_strategy=fast_ddp on cpu" in tags["sweep.notes"]
    assert "devices on cpu are processes (torchrun ranks) sharing this host's" in tags["sweep.notes"]
    note = tags["mlflow.note.content"]
    assert "| w1 decode=cpu d1 |" in note and "| w1 decode=cpu d2 |" in note and "model=tiny" in note
    assert note.count("## [") == 1 and "Scaling over devices" in note  # one section, its scaling table
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "compare")}
    assert {"compare/report.md", "compare/scaling.png", "compare/speedups.csv", "compare/tables"} <= artifacts
