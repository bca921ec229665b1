"""Checkpoints through the tracking server, and a resume on an empty disk, against a real `mlflow server` with
`--artifacts-destination` (proxied artifacts): SIGKILL after the second checkpoint, the output folder deleted,
`--resume true --run-id` in a fresh folder continues the same run with every step once; a kill during an upload
is never resumed from; refusals leave the run exactly as it was."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import BIN, REPO, no_running_runs
from tests.support.holding_proxy import HoldingProxy

pytestmark = pytest.mark.slow
MARKER = "checkpoint-complete.json"
ARGS = ["--max-steps", "12", "--save-steps", "3", "--logging-steps", "1", "--per-device-train-batch-size", "8",
        "--dataloader-num-workers", "0", "--log-model", "false", "--experiment-name", "uploads"]
PACED = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests" / "fakes" / "slow_device"),
                                                     os.environ.get("PYTHONPATH")])),
         "BRIDGETOWER_TEST_STEP_S": "0.5"}


def _train(args, tracking_uri, env_extra=None, **popen):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "MLFLOW_TRACKING_URI": tracking_uri,
           **PACED, **(env_extra or {})}
    return subprocess.Popen([str(BIN / "bridgetower-mlflow"), "train", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def _wait_for(predicate, what, process=None, timeout=600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if process is not None and process.poll() is not None:
            err = process.communicate()[1]
            raise AssertionError(f"train ended ({process.returncode}) before {what}: {err[-3000:]}")
        time.sleep(0.1)
    raise TimeoutError(f"{what} not seen in {timeout} s")


def _uploaded(server):
    """{checkpoint name: whole?} on the server's artifact destination."""
    return {p.name: (p / MARKER).exists() for p in server.artifacts.glob("*/*/artifacts/checkpoints/checkpoint-*")}


def _killed_while_holding(process):
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)


def _error_line(done_stderr):
    assert "Traceback" not in done_stderr, done_stderr[-3000:]
    (line,) = [x for x in done_stderr.splitlines() if x.startswith("error: ")]
    return line.removeprefix("error: ")


def _run_result(process, timeout=900):
    _, err = process.communicate(timeout=timeout)
    return process.returncode, err


def test_sigkill_after_the_second_checkpoint_then_a_resume_in_a_fresh_folder(cache_dir, mlflow_server, tmp_path):
    client = MlflowClient(mlflow_server.url)
    hold = tmp_path / "hold"
    hold.touch()  # step 7 does not end while it exists: the run waits just after its second checkpoint
    first = _train([*ARGS, "--checkpoint-upload", "true", "--output-dir", str(tmp_path / "a")], mlflow_server.url,
                   {"BRIDGETOWER_TEST_HOLD_FILE": str(hold), "BRIDGETOWER_TEST_HOLD_AT": "7"}, start_new_session=True)
    try:
        _wait_for(lambda: _uploaded(mlflow_server) == {"checkpoint-6": True}, "checkpoint-6 whole on the server and "
                  "checkpoint-3 deleted", first)
    finally:
        _killed_while_holding(first)
    (run,) = client.search_runs([client.get_experiment_by_name("uploads").experiment_id])
    run_id = run.info.run_id
    assert run.info.status == "RUNNING"  # nobody was left to end it
    shutil.rmtree(tmp_path / "a")  # the disk is gone (a rescheduled pod, a replaced spot instance)

    refused = _train([*ARGS, "--learning-rate", "2e-5", "--resume", "true", "--run-id", run_id, "--output-dir",
                      str(tmp_path / "b")], mlflow_server.url)
    code, err = _run_result(refused)
    assert code == 2 and _error_line(err) == (f"learning_rate: invalid value '2e-05'; allowed: '1e-05', the value "
                                              f"run {run_id} was trained with (a resume keeps its settings; train a "
                                              "new run to change them)")
    unchanged = client.get_run(run_id)
    assert (unchanged.info.status, unchanged.data.tags) == (run.info.status, run.data.tags)
    assert not (tmp_path / "b" / run_id).exists()

    resumed = _train([*ARGS, "--checkpoint-upload", "true", "--resume", "true", "--run-id", run_id, "--output-dir",
                      str(tmp_path / "b")], mlflow_server.url)
    code, err = _run_result(resumed)
    assert code == 0, err[-3000:]
    assert f"downloading checkpoints/checkpoint-6 of run {run_id} from the tracking server" in err
    finished = client.get_run(run_id)
    assert finished.info.status == "FINISHED" and finished.data.tags["resumed.from_step"] == "6"
    assert sorted(m.step for m in client.get_metric_history(run_id, "loss")) == list(range(1, 13))
    assert _uploaded(mlflow_server) == {"checkpoint-12": True}  # the latest whole one kept, older ones deleted

    again = _train([*ARGS, "--resume", "true", "--run-id", run_id, "--output-dir", str(tmp_path / "c")],
                   mlflow_server.url)
    code, err = _run_result(again)
    assert code == 2 and _error_line(err) == (f"resume: invalid value 'true'; allowed only for a run that did not "
                                              f"finish; run {run_id} is FINISHED (train a new run to train more)")
    assert client.get_run(run_id).data.tags == finished.data.tags
    assert no_running_runs(mlflow_server.backend_uri) == []


def test_a_kill_during_an_upload_is_never_resumed_from(cache_dir, mlflow_server, tmp_path):
    client = MlflowClient(mlflow_server.url)
    proxy = HoldingProxy(mlflow_server.url, hold=f"checkpoints/checkpoint-6/{MARKER}")  # a network that stalls
    hold = tmp_path / "hold"
    hold.touch()
    try:
        first = _train([*ARGS, "--checkpoint-upload", "true", "--output-dir", str(tmp_path / "a")], proxy.url,
                       {"BRIDGETOWER_TEST_HOLD_FILE": str(hold), "BRIDGETOWER_TEST_HOLD_AT": "7"},
                       start_new_session=True)
        try:
            _wait_for(proxy.held.is_set, "checkpoint-6's marker upload", first)
        finally:
            _killed_while_holding(first)
    finally:
        proxy.close()
    assert _uploaded(mlflow_server) == {"checkpoint-3": True, "checkpoint-6": False}  # its files, not its marker
    (run,) = client.search_runs([client.get_experiment_by_name("uploads").experiment_id])
    shutil.rmtree(tmp_path / "a")

    # without --run-id: MLFLOW_RUN_ID names the run (a restarted pod keeps its run's id)
    resumed = _train([*ARGS, "--resume", "true", "--output-dir", str(tmp_path / "b")], mlflow_server.url,
                     {"MLFLOW_RUN_ID": run.info.run_id})
    code, err = _run_result(resumed)
    assert code == 0, err[-3000:]
    finished = client.get_run(run.info.run_id)
    assert finished.info.status == "FINISHED" and finished.data.tags["resumed.from_step"] == "3"
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss")) == list(range(1, 13))


def test_a_run_whose_uploads_are_all_cut_is_refused_and_left_as_it_was(cache_dir, mlflow_server, tmp_path):
    client = MlflowClient(mlflow_server.url)
    experiment = client.create_experiment("uploads")
    run_id = client.create_run(experiment).info.run_id
    torn = tmp_path / "checkpoint-5"
    torn.mkdir()
    (torn / "model.safetensors").write_bytes(b"\0" * 1000)
    client.log_artifact(run_id, str(torn / "model.safetensors"), "checkpoints/checkpoint-5")  # the upload was cut
    before = client.get_run(run_id)
    # MLFLOW_RUN_ID names it (a restarted pod): the refusal leaves it RUNNING, not marked FAILED for a bad resume
    refused = _train([*ARGS, "--resume", "true", "--output-dir", str(tmp_path / "out")], mlflow_server.url,
                     {"MLFLOW_RUN_ID": run_id})
    code, err = _run_result(refused)
    assert code == 2 and _error_line(err) == (
        f"resume: invalid value 'true'; allowed only with a complete checkpoint; '{tmp_path / 'out' / run_id}' "
        "holds no checkpoint (train with save_steps>0, or wait for the first save); its uploads under checkpoints/ "
        "are incomplete (checkpoint-5: no completion marker)")
    after = client.get_run(run_id)
    assert (after.info.status, after.data.tags, after.data.params) == \
        ("RUNNING", before.data.tags, before.data.params)
