"""Against real processes: a tracking-server outage mid-training, and SIGKILL then resume."""

import os
import signal
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

from conftest import BIN, MlflowServer, no_running_runs

pytestmark = pytest.mark.slow
STEP_KEYS = ("loss", "step_samples_per_second", "step_dataloader_wait_fraction")


def _train(args, env_extra=None, **popen):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **(env_extra or {})}
    return subprocess.Popen([str(BIN / "bridgetower-mlflow"), "train", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def _wait_for(predicate, timeout=300, interval=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(predicate)


def _steps(client, run_id, key):
    return [m.step for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]


def _one_run(client):
    runs = client.search_runs(["0"])
    return runs[0].info.run_id if len(runs) == 1 else None


def test_server_outage_mid_training_loses_nothing(cache_dir, tmp_path, monkeypatch):
    server = MlflowServer(f"sqlite:///{tmp_path / 'outage.db'}", tmp_path / "artifacts").start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    client = MlflowClient(server.url)
    steps = 60
    proc = _train(["--max-steps", str(steps), "--logging-steps", "1", "--per-device-train-batch-size", "8",
                   "--dataloader-num-workers", "0", "--log-model", "false"],
                  {"BRIDGETOWER_FLUSH_TIMEOUT": "180"})
    try:
        run_id = _wait_for(lambda: _one_run(client))
        _wait_for(lambda: len(_steps(client, run_id, "loss")) >= 3)
        server.stop()
        outage_started = time.monotonic()
        time.sleep(12)  # training goes on while the server is away
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        server.start()
        outage = time.monotonic() - outage_started
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED"
        for key in STEP_KEYS:
            assert _steps(client, run_id, key) == list(range(1, steps + 1)), key
        assert "train_samples_per_second" in run.data.metrics and "eval_loss" in run.data.metrics
        system = _steps(client, run_id, "system/main_process_cpu_percentage")
        assert system == list(range(len(system))) and len(system) >= 2
        print(f"outage survived: {outage:.1f} s")
    finally:
        proc.kill()
        server.stop()


def test_sigkill_then_resume_continues_the_same_run(cache_dir, sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    steps = 120
    args = ["--max-steps", str(steps), "--logging-steps", "1", "--save-steps", "4", "--per-device-train-batch-size",
            "8", "--dataloader-num-workers", "0", "--log-model", "false", "--output-dir", str(tmp_path / "out")]
    first = _train(args, start_new_session=True)
    run_id = _wait_for(lambda: _one_run(client))
    checkpoints = tmp_path / "out" / run_id
    _wait_for(lambda: len(_steps(client, run_id, "loss")) >= 8 and any(checkpoints.glob("checkpoint-*")), interval=0.1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    before = _steps(client, run_id, "loss")
    resumed = _train([*args, "--resume", "true"])
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    assert _one_run(client) == run_id
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["resumed"] == "true"
    for key in STEP_KEYS:
        assert _steps(client, run_id, key) == list(range(1, steps + 1)), key
    assert _steps(client, run_id, "loss")[: len(before)] == before
    assert no_running_runs(sqlite_uri) == []


def test_resume_with_a_different_learning_rate_is_refused(cache_dir, sqlite_uri, tmp_path):
    args = ["--max-steps", "5", "--save-steps", "5", "--per-device-train-batch-size", "8", "--dataloader-num-workers",
            "0", "--log-model", "false", "--output-dir", str(tmp_path / "out")]
    done = _train(args)
    assert done.wait(timeout=600) == 0
    again = _train([*args, "--resume", "true", "--learning-rate", "5e-5"])
    _, err = again.communicate(timeout=600)
    assert again.returncode == 2
    assert err.strip().splitlines()[-1].startswith("error: learning_rate: invalid value '5e-05'; allowed: '1e-05'")
    assert no_running_runs(sqlite_uri) == []
    assert MlflowClient(sqlite_uri).search_runs(["0"])[0].info.status == "FINISHED"  # left as it was
