"""Two `train` processes at once, as real processes: on a fresh sqlite store (one creates the schema, the
other waits), and into one output folder (the second is refused, a resume too while the first runs; the
lock of a SIGKILLed train is stale and taken over)."""

import os
import signal
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import BIN, REPO, no_running_runs

pytestmark = pytest.mark.slow
QUICK = ["--max-steps", "5", "--per-device-train-batch-size", "8", "--dataloader-num-workers", "0",
         "--log-model", "false", "--max-eval-samples", "16"]


def _train(args, env_extra=None):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **(env_extra or {})}
    return subprocess.Popen([str(BIN / "bridgetower-mlflow"), "train", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_first_trains_on_a_fresh_sqlite_store_both_finish(cache_dir, tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    procs = [_train([*QUICK, "--output-dir", str(tmp_path / f"out{i}")]) for i in range(2)]
    results = [proc.communicate(timeout=600) for proc in procs]
    for proc, (_, err) in zip(procs, results):
        assert proc.returncode == 0, err[-3000:]
    runs = MlflowClient(uri).search_runs(["0"])
    assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"]
    again = _train([*QUICK, "--output-dir", str(tmp_path / "out2")])  # the store is still good for later runs
    assert again.wait(timeout=600) == 0, again.communicate()[1][-3000:]


def _one_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: output_dir:"), err[-3000:]
    return lines[0]


def test_an_output_folder_in_use_is_refused_until_its_train_dies(cache_dir, sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    out = tmp_path / "out"
    args = ["--max-steps", "30", "--save-steps", "5", "--per-device-train-batch-size", "8",
            "--dataloader-num-workers", "0", "--log-model", "false", "--output-dir", str(out)]
    paced = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests" / "fakes" / "slow_device"),
                                                         os.environ.get("PYTHONPATH")])),
             "BRIDGETOWER_TEST_STEP_S": "0.5"}
    first = _train(args, paced)
    try:
        deadline = time.monotonic() + 300
        while not list(out.glob("*/checkpoint-5/trainer_state.json")) and first.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint-5 within 300 s of the first train's start"
            time.sleep(0.2)
        for extra in ([], ["--resume", "true"]):
            second = _train([*args, *extra])
            _, err = second.communicate(timeout=300)
            assert second.returncode == 2, err[-3000:]
            line = _one_line(err)
            assert f"pid {first.pid}" in line and str(out) in line, line
        assert first.poll() is None
        assert len(client.search_runs(["0"])) == 1  # the refused ones never started a run
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        first.kill()
    resumed = _train([*args, "--resume", "true"])  # the dead train's lock is stale: taken over
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    runs = client.search_runs(["0"])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert no_running_runs(sqlite_uri) == []
