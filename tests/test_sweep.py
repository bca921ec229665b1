"""sweep orchestration with a fake train command (a real subprocess writing a real sqlite store)."""

import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.sweep.command import sweep_command
from bridgetower_mlflow.sweep.grid import parse_device_decode, parse_workers, plan_cells

FAKE_TRAIN = textwrap.dedent("""
    import argparse, os, shlex, sys
    sys.path.insert(0, os.environ["FAKES_DIR"])
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag
    from fakes.synthetic_runs import TrainRunSpec, train_run_contents

    parser = argparse.ArgumentParser()
    parser.add_argument("--accel")
    parser.add_argument("--dataloader-num-workers", type=int)
    parser.add_argument("--device-decode")
    args, rest = parser.parse_known_args()
    if str(args.dataloader_num_workers) in os.environ.get("FAKE_TRAIN_CRASH_WORKERS", "").split(","):
        print("simulated crash before the run ends")
        sys.exit(3)
    run_id = os.environ["MLFLOW_RUN_ID"]
    client = MlflowClient()
    spec = TrainRunSpec(args.accel, 10.0 * (1 + args.dataloader_num_workers), args.dataloader_num_workers,
                        args.device_decode == "true", devices=1, batch=4, model="tiny")
    params, tags, metrics = train_run_contents(spec)
    tags.pop("mlflow.runName")
    tags["fake.argv"] = shlex.join(sys.argv[1:])
    client.log_batch(run_id, metrics=[Metric(k, v, 0, 0) for k, v in metrics.items()],
                     params=[Param(k, v) for k, v in params.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])
    client.set_terminated(run_id, "FINISHED")
""")


@pytest.fixture
def fake_store(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    client.create_experiment("sweeps", artifact_location=str(tmp_path / "artifacts"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("BRIDGETOWER_TRAIN_CMD", f"{sys.executable} {script}")
    monkeypatch.setenv("FAKES_DIR", str(Path(__file__).parent))
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "FAKE_TRAIN_CRASH_WORKERS"):
        monkeypatch.delenv(name, raising=False)
    return client


def _children(client, parent_id):
    runs = client.search_runs(
        [client.get_run(parent_id).info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'"
    )
    return {run.info.run_name: run for run in runs}


def _parent(client):
    experiment = client.get_experiment_by_name("sweeps")
    (run,) = client.search_runs([experiment.experiment_id], "tags.`bridgetower.run_kind` = 'sweep'")
    return run


def test_grid_is_repeat_major_and_device_decode_is_skipped_where_unsupported():
    plan = plan_cells("cpu", [0, 1], [False, True], 2, supports_device_decode=False)
    assert [c.run_name for c in plan.cells] == [
        "cpu w0 decode=cpu r1", "cpu w1 decode=cpu r1", "cpu w0 decode=cpu r2", "cpu w1 decode=cpu r2"]
    assert "skipped device_decode=true on cpu" in plan.notes[0]
    full = plan_cells("gaudi2", [2], [False, True], 1, supports_device_decode=True)
    assert [c.train_args()[5] for c in full.cells] == ["false", "true"] and not full.notes


def test_grid_values_are_validated():
    assert parse_workers("0, 1,2,1") == [0, 1, 2]
    assert parse_device_decode("False,TRUE") == [False, True]
    with pytest.raises(ConfigError, match="workers"):
        parse_workers("0,-1")
    with pytest.raises(ConfigError, match="device_decode"):
        parse_device_decode("maybe")


def test_cpu_sweep_runs_children_then_compares_on_the_parent(fake_store):
    result = CliRunner().invoke(sweep_command, [
        "--accel", "cpu", "--workers", "0,1", "--repeats", "2", "--experiment-name", "sweeps",
        "--max-steps", "3", "--seed", "7"])
    assert result.exit_code == 0, result.output
    parent = _parent(fake_store)
    children = _children(fake_store, parent.info.run_id)
    assert sorted(children) == ["cpu w0 decode=cpu r1", "cpu w0 decode=cpu r2",
                                "cpu w1 decode=cpu r1", "cpu w1 decode=cpu r2"]
    for run in children.values():
        assert run.info.status == "FINISHED" and run.data.tags["bridgetower.run_kind"] == "train"
        argv = run.data.tags["fake.argv"]
        assert "--max-steps 3" in argv and "--seed 7" in argv and "--experiment-name sweeps" in argv
    assert "[1/4] cpu w0 decode=cpu r1: 10.0 samples/s (FINISHED), 3 left" in result.output
    assert "note: skipped device_decode=true on cpu" in result.output
    tags = fake_store.get_run(parent.info.run_id).data.tags
    assert "skipped device_decode=true on cpu" in tags["sweep.notes"]
    assert tags["sweep.finished"] == "4" and tags["sweep.failed"] == "0"
    assert "| w1 decode=cpu | 2.00x |" in tags["mlflow.note.content"]
    artifacts = {a.path for a in fake_store.list_artifacts(parent.info.run_id, "compare")}
    assert "compare/speedups.png" in artifacts and "compare/report.md" in artifacts
    assert fake_store.get_run(parent.info.run_id).info.status == "FINISHED"


def test_a_crashing_child_is_failed_and_the_sweep_goes_on(fake_store, monkeypatch):
    monkeypatch.setenv("FAKE_TRAIN_CRASH_WORKERS", "1")
    result = CliRunner().invoke(sweep_command, [
        "--workers", "0,1,2", "--device-decode", "false", "--repeats", "1", "--experiment-name", "sweeps"])
    assert result.exit_code == 1
    parent = _parent(fake_store)
    children = _children(fake_store, parent.info.run_id)
    assert children["cpu w1 decode=cpu r1"].info.status == "FAILED"
    assert children["cpu w2 decode=cpu r1"].info.status == "FINISHED"
    assert "simulated crash" in result.output  # the child's output tail is shown
    tags = fake_store.get_run(parent.info.run_id).data.tags
    assert tags["sweep.failed"] == "1" and "cpu w1 decode=cpu r1" in tags["sweep.notes"]
    assert "| w2 decode=cpu | 3.00x |" in tags["mlflow.note.content"]
    logs = fake_store.list_artifacts(children["cpu w1 decode=cpu r1"].info.run_id, "sweep")
    assert [a.path for a in logs] == ["sweep/train_output.log"]


def test_under_mlflow_run_the_project_run_is_the_parent(fake_store, monkeypatch):
    experiment_id = fake_store.get_experiment_by_name("sweeps").experiment_id
    project_run = fake_store.create_run(experiment_id).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", project_run)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", experiment_id)
    result = CliRunner().invoke(sweep_command, ["--workers", "0", "--device-decode", "false", "--repeats", "1"])
    assert result.exit_code == 0, result.output
    assert list(_children(fake_store, project_run)) == ["cpu w0 decode=cpu r1"]
    run = fake_store.get_run(project_run)
    assert run.data.tags["bridgetower.run_kind"] == "sweep"
    assert run.info.status == "RUNNING"  # mlflow run ends its own run when the process exits


def test_unknown_accelerator_fails_before_any_run(fake_store):
    result = CliRunner().invoke(sweep_command, ["--accel", "tpu", "--experiment-name", "sweeps"])
    assert result.exit_code == 2 and "accel" in result.stderr
    experiment_id = fake_store.get_experiment_by_name("sweeps").experiment_id
    assert fake_store.search_runs([experiment_id]) == []
