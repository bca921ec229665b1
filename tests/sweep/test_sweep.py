"""sweep orchestration with a fake train command (a real subprocess writing a real sqlite store)."""

import shlex
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.sweep.command import sweep_command
from bridgetower_mlflow.sweep.grid import Capabilities, SweepAxes, parse_device_decode, parse_workers, plan_cells

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
    parser.add_argument("--per-device-train-batch-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--target", default="")
    parser.add_argument("--stop-at-target", default="true")
    args, rest = parser.parse_known_args()
    if str(args.dataloader_num_workers) in os.environ.get("FAKE_TRAIN_CRASH_WORKERS", "").split(","):
        print("simulated crash before the run ends")
        sys.exit(3)
    run_id = os.environ["MLFLOW_RUN_ID"]
    client = MlflowClient()
    spec = TrainRunSpec(args.accel, 10.0 * (1 + args.dataloader_num_workers), args.dataloader_num_workers,
                        args.device_decode == "true", devices=1, batch=args.per_device_train_batch_size,
                        model="tiny", seed=args.seed, target=args.target, stop_at_target=args.stop_at_target == "true",
                        samples_to_target=96.0 if args.target else None, time_to_target=1.0 if args.target else None)
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
    monkeypatch.setenv("FAKES_DIR", str(Path(__file__).parents[1]))  # tests/, which holds fakes/
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
    plan = plan_cells("cpu", SweepAxes([0, 1], [False, True], 2), Capabilities(device_decode=False))
    assert [c.run_name for c in plan.cells] == [
        "cpu w0 decode=cpu r1", "cpu w1 decode=cpu r1", "cpu w0 decode=cpu r2", "cpu w1 decode=cpu r2"]
    assert "skipped device_decode=true on cpu" in plan.notes[0]
    full = plan_cells("gaudi2", SweepAxes([2], [False, True], 1), Capabilities(device_decode=True))
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
        "--max-steps", "4", "--seed", "7"])
    assert result.exit_code == 0, result.output
    parent = _parent(fake_store)
    children = _children(fake_store, parent.info.run_id)
    assert sorted(children) == ["cpu w0 decode=cpu r1", "cpu w0 decode=cpu r2",
                                "cpu w1 decode=cpu r1", "cpu w1 decode=cpu r2"]
    for run in children.values():
        assert run.info.status == "FINISHED" and run.data.tags["bridgetower.run_kind"] == "train"
        argv = run.data.tags["fake.argv"]
        assert "--max-steps 4" in argv and "--seed 7" in argv and "--experiment-name sweeps" in argv
        assert "--distribution-strategy ddp" in argv  # the default strategy, said explicitly
        assert "--per-device-train-batch-size" not in argv and "--image-backend" not in argv  # train's defaults
    assert "[1/4] cpu w0 decode=cpu r1: 10.0 samples/s (FINISHED), 3 left" in result.output
    assert "note: skipped device_decode=true on cpu" in result.output
    tags = fake_store.get_run(parent.info.run_id).data.tags
    assert "skipped device_decode=true on cpu" in tags["sweep.notes"]
    assert tags["sweep.finished"] == "4" and tags["sweep.failed"] == "0"
    assert (tags["sweep.distribution_strategy"], tags["sweep.per_device_train_batch_size"]) == ("ddp", "default")
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


def test_strategy_and_batch_axes_reach_every_child_and_each_cell_says_when_it_starts(fake_store):
    result = CliRunner().invoke(sweep_command, [
        "--workers", "0,1", "--device-decode", "false", "--distribution-strategy", "ddp,fast_ddp",
        "--per_device_train_batch_size", "4,8", "--repeats", "1", "--image-backend", "study",
        "--experiment-name", "sweeps"])
    assert result.exit_code == 0, result.output
    names = ["cpu w0 decode=cpu ddp b4 r1", "cpu w1 decode=cpu ddp b4 r1",
             "cpu w0 decode=cpu ddp b8 r1", "cpu w1 decode=cpu ddp b8 r1"]
    lines = result.output.splitlines()
    assert "note: skipped distribution_strategy=fast_ddp on cpu: the cpu adapter has no fast_ddp " \
           "(4 cells not run, not faked)" in lines
    for index, name in enumerate(names, 1):  # each start line comes before that cell's end line
        start = lines.index(f"[{index}/4] starting {name}")
        end = next(i for i, line in enumerate(lines) if line.startswith(f"[{index}/4] {name}: "))
        assert start < end and lines[end].endswith(f"(FINISHED), {4 - index} left")
    parent = _parent(fake_store)
    children = _children(fake_store, parent.info.run_id)
    assert sorted(children) == sorted(names)
    for name, run in children.items():
        argv, batch = run.data.tags["fake.argv"], name.split()[-2][1:]
        assert "--distribution-strategy ddp" in argv and f"--per-device-train-batch-size {batch}" in argv
        assert "--image-backend study" in argv
        assert run.data.params["per_device_train_batch_size"] == batch
        assert run.data.tags["sweep.cell"] == name.removeprefix("cpu ").removesuffix(" r1")
    tags = fake_store.get_run(parent.info.run_id).data.tags
    assert (tags["sweep.distribution_strategy"], tags["sweep.per_device_train_batch_size"]) == ("ddp,fast_ddp", "4,8")
    assert tags["sweep.cells"] == "4" and "skipped distribution_strategy=fast_ddp on cpu" in tags["sweep.notes"]


def test_a_target_reaches_every_cell_and_each_repeat_gets_its_own_seed(fake_store):
    result = CliRunner().invoke(sweep_command, [
        "--workers", "0", "--device-decode", "false", "--repeats", "3", "--target", "recall_at_5>=0.20",
        "--eval-steps", "8", "--stop-at-target", "false", "--seed", "7", "--experiment-name", "sweeps"])
    assert result.exit_code == 0, result.output
    parent = _parent(fake_store)
    children = _children(fake_store, parent.info.run_id)
    for repeat in (1, 2, 3):
        run = children[f"cpu w0 decode=cpu r{repeat}"]
        argv = shlex.split(run.data.tags["fake.argv"])
        given = {name: argv[argv.index(name) + 1]
                 for name in ("--target", "--eval-steps", "--stop-at-target", "--seed")}
        assert given == {"--target": "eval_recall_at_5>=0.2", "--eval-steps": "8", "--stop-at-target": "false",
                         "--seed": str(6 + repeat)}  # the target's canonical spelling; MLPerf: a seed a run
        assert run.data.params["seed"] == str(6 + repeat) and run.data.params["target"] == "eval_recall_at_5>=0.2"
        assert run.data.tags["sweep.cell"] == "w0 decode=cpu"
    tags = fake_store.get_run(parent.info.run_id).data.tags
    assert (tags["sweep.target"], tags["sweep.eval_steps"], tags["sweep.seed"]) == ("eval_recall_at_5>=0.2", "8", "7")
    note = tags["mlflow.note.content"]
    assert "| w0 decode=cpu | cpu | eval_recall_at_5>=0.2 (trained on) |" in note  # three seeds, one cell
    assert "| 3 of 3 | 96 (n=3, 96-96) |" in note


@pytest.mark.parametrize(("args", "message"), [
    (["--target", "recall@5>0.2"], "target: invalid value 'recall@5>0.2'; allowed: one eval metric"),
    (["--eval-steps", "-1"], "eval_steps: invalid value '-1'"),
    (["--distribution-strategy", "ddp,ring"], "distribution_strategy: invalid value 'ddp,ring'"),
    (["--distribution_strategy", "fast_ddp"], "distribution_strategy: invalid value 'fast_ddp'; allowed on cpu: ddp"),
    (["--per-device-train-batch-size", "8,0"], "per_device_train_batch_size: invalid value '0'"),
    (["--devices", "1,x"], "devices: invalid value 'x'; allowed: a whole number"),
    (["--max-steps", "2"], "throughput_warmup_steps: invalid value 3; allowed: fewer than max_steps=2"),
    (["--max-steps", "4", "--throughput-warmup-steps", "4"], "throughput_warmup_steps: invalid value 4; allowed: "
                                                            "fewer than max_steps=4"),
])
def test_bad_axis_values_fail_before_any_run(fake_store, args, message):
    result = CliRunner().invoke(sweep_command, [*args, "--experiment-name", "sweeps"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [result.stderr.strip()] and message in result.stderr
    experiment_id = fake_store.get_experiment_by_name("sweeps").experiment_id
    assert fake_store.search_runs([experiment_id]) == []
