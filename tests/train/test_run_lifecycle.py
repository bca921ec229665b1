"""TrackedRun, NullRun and the flow on their own (issue 32): how a run ends when training fails, is stopped or is
refused, on a real sqlite store, and the flow's untracked path in process. The subprocess tests reach the same
code end to end; these name the rule each one holds."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.launch.ranks import RankInfo
from bridgetower_mlflow.launch.signals import Stopped
from bridgetower_mlflow.tracking.session import RunSession
from bridgetower_mlflow.train.result import Measured
from bridgetower_mlflow.train.run import NullRun, TrackedRun

ONE_RANK = RankInfo(0, 0, 1)


@pytest.fixture
def session(sqlite_uri, cache_dir):
    return RunSession.start("lifecycle", "unit", {})


def _run(sqlite_uri, run_id):
    return MlflowClient(sqlite_uri).get_run(run_id)


def test_a_failure_ends_the_run_failed_with_its_first_line(sqlite_uri, session):
    TrackedRun(session, flush_timeout_s=30).fail(ValueError("the loader broke\nsecond line"))
    run = _run(sqlite_uri, session.run_id)
    assert (run.info.status, run.data.tags["error"]) == ("FAILED", "the loader broke")


def test_a_stop_signal_ends_the_run_killed(sqlite_uri, session):
    TrackedRun(session, flush_timeout_s=30).fail(Stopped(signal.SIGTERM).at(step=4, run_id=session.run_id))
    run = _run(sqlite_uri, session.run_id)
    assert (run.info.status, run.data.tags["error"]) == ("KILLED", "stopped by SIGTERM")


def test_a_refused_resume_leaves_the_run_as_it_was(sqlite_uri, cache_dir):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("resumed")).info.run_id
    client.set_terminated(run_id, "KILLED")
    session = RunSession.start("", "", {}, resume_run_id=run_id)
    TrackedRun(session, flush_timeout_s=30).fail(ConfigError("learning_rate", "5e-05", "allowed: '1e-05'"))
    run = _run(sqlite_uri, run_id)
    assert run.info.status == "KILLED" and "error" not in run.data.tags


def test_a_stop_carries_what_each_layer_knows():
    raised = Stopped(signal.SIGINT)
    known = raised.at(step=12).at(run_id="abc")
    assert (known.step, known.run_id, known.signal_name, known.exit_code) == (12, "abc", "SIGINT", 130)
    assert (raised.step, raised.run_id) == (None, None)  # the first one is left as it was raised


def test_a_rank_without_a_run_ends_with_its_own_numbers_and_logs_nothing():
    metrics = {"train_samples_per_second": 12.5}
    run = NullRun("abc")
    run.fail(RuntimeError("ignored: rank 0 ends the run"))
    result = run.close(SimpleNamespace(), SimpleNamespace(), SimpleNamespace(), Measured(metrics), ONE_RANK)
    assert (result.run_id, result.metrics) == ("abc", {"train_samples_per_second": 12.5})


def test_the_untracked_flow_trains_measures_and_creates_no_run(sqlite_uri, cache_dir, tmp_path):
    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.train.flow import train

    config = build_train_config(max_steps=4, throughput_warmup_steps=1, per_device_train_batch_size=4,
                                max_train_samples=16, max_eval_samples=4, max_seq_length=16,
                                dataloader_num_workers=0, log_model=False, output_dir=str(tmp_path / "out"))
    result = train(config, tracked=False)
    assert result.run_id is None and result.metrics["train_samples_per_second"] > 0
    assert (tmp_path / "out" / "run").is_dir()  # an untracked run's folder: <output_dir>/run
    client = MlflowClient(sqlite_uri)
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def test_what_escapes_the_lifecycle_ends_the_run_and_a_stop_names_it(sqlite_uri, session):
    from bridgetower_mlflow.train.run import run_lifecycle

    with pytest.raises(Stopped) as raised, run_lifecycle(TrackedRun(session, flush_timeout_s=30)):
        raise Stopped(signal.SIGTERM).at(step=7)
    assert (raised.value.run_id, raised.value.step) == (session.run_id, 7)
    assert _run(sqlite_uri, session.run_id).info.status == "KILLED"


def test_train_reaches_its_flow_before_torch_loads():
    """The flow sets the stack's environment (PT_HPU_LAZY_MODE) and hides a broken torchvision before anything
    imports torch: train's entry, its environment check and the flow module import none of them."""
    import subprocess
    import sys

    probe = ("import sys\nfrom bridgetower_mlflow.environment import read_run_environment\nread_run_environment()\n"
             "import bridgetower_mlflow.train.command, bridgetower_mlflow.train.flow\n"
             "print(sorted(m for m in ('torch', 'transformers', 'torchvision') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]


def test_the_libraries_environment_is_exported_in_one_place_and_the_users_values_win():
    from bridgetower_mlflow.environment import export_for_libraries

    environ = {"TOKENIZERS_PARALLELISM": "true", "PATH": "/bin"}
    exported = export_for_libraries({"PT_HPU_LAZY_MODE": "1"}, {"RANK": "1", "WORLD_SIZE": "2"}, environ=environ)
    assert exported == {"HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "PT_HPU_LAZY_MODE": "1", "RANK": "1",
                        "WORLD_SIZE": "2"}
    assert environ == {"TOKENIZERS_PARALLELISM": "true", "PATH": "/bin", **exported}


def test_a_sweep_cell_is_read_with_the_rest_of_the_environment():
    from bridgetower_mlflow.environment import read_run_environment

    assert read_run_environment({"BRIDGETOWER_SWEEP_CELL": "1"}).sweep_cell
    assert not read_run_environment({}).sweep_cell
    assert not read_run_environment({"BRIDGETOWER_SWEEP_CELL": "0"}).sweep_cell


def test_the_project_run_is_read_with_the_rest_of_the_environment():
    from bridgetower_mlflow.environment import read_run_environment

    assert read_run_environment({"MLFLOW_RUN_ID": "abc"}).project_run_id == "abc"
    assert read_run_environment({}).project_run_id is None
    assert read_run_environment({"MLFLOW_RUN_ID": ""}).project_run_id is None


def test_a_resume_falls_back_to_the_project_run_it_was_given(tmp_path):
    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.train.checkpoints.resume import project_run_of_resume, run_to_resume

    config = build_train_config(resume=True, output_dir=str(tmp_path / "empty"))
    assert run_to_resume(config, "abc") == "abc"
    with pytest.raises(ConfigError, match="resume"):
        run_to_resume(config, None)
    assert project_run_of_resume("resumed", "abc") == "abc"  # `mlflow run -P resume=true`'s own run
    assert project_run_of_resume("abc", "abc") is None and project_run_of_resume(None, "abc") is None


def test_a_tracked_train_continues_the_project_run_its_environment_names(sqlite_uri, cache_dir, tmp_path,
                                                                           monkeypatch):
    """The run `mlflow run` made is read once, at train's entry: a variable changed later is not read again."""
    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.environment import RunEnvironment
    from bridgetower_mlflow.train.flow import train

    client = MlflowClient(sqlite_uri)
    project_run = client.create_run(client.create_experiment("project")).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", "0" * 32)  # no such run: reading it now would fail the start
    config = build_train_config(max_steps=2, throughput_warmup_steps=1, per_device_train_batch_size=4,
                                max_train_samples=8, max_eval_samples=4, max_seq_length=16,
                                dataloader_num_workers=0, log_model=False, output_dir=str(tmp_path / "out"))
    result = train(config, environment=RunEnvironment(progress_seconds=60, flush_timeout_s=30,
                                                      project_run_id=project_run))
    run = client.get_run(project_run)
    assert result.run_id == project_run, (result.run_id, project_run)
    assert run.info.status == "FINISHED" and run.data.metrics["train_samples_per_second"] > 0
