"""SIGTERM (schedulers, Kubernetes, Ray) and SIGINT (Ctrl-C) sent to a real `train`: the run ends KILLED with
its reason, every step trained so far reaches the store, one line says how to resume, and the exit status is
the shell's (128 + the signal). A resume then finishes the run and clears the stale reason."""

import os
import re
import signal
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

from conftest import BIN, REPO, no_running_runs

pytestmark = pytest.mark.slow
PACED = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests" / "fakes" / "slow_device"),
                                                     os.environ.get("PYTHONPATH")])),
         "BRIDGETOWER_TEST_STEP_S": "0.5"}


def _train(args):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **PACED}
    return subprocess.Popen([str(BIN / "bridgetower-mlflow"), "train", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(predicate, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(predicate)


def _loss_steps(client, run_id):
    return sorted(m.step for m in client.get_metric_history(run_id, "loss"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_the_run_killed_with_every_step_and_a_resume_line(cache_dir, sqlite_uri, tmp_path, sig):
    client = MlflowClient(sqlite_uri)
    out = tmp_path / "out"
    args = ["--max-steps", "40", "--logging-steps", "1", "--save-steps", "5", "--per-device-train-batch-size", "8",
            "--dataloader-num-workers", "0", "--log-model", "false", "--output-dir", str(out)]
    proc = _train(args)
    try:
        run_id = _wait_for(lambda: next((r.info.run_id for r in client.search_runs(["0"])), None))
        _wait_for(lambda: (out / run_id / "checkpoint-5" / "trainer_state.json").exists() or proc.poll() is not None)
        time.sleep(2)  # a few steps past the checkpoint, inside the buffer's 5 s shipment window
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert sig.name in lines[0] and f"--output-dir {out}" in lines[0] and "--resume true" in lines[0], lines
    run = client.get_run(run_id)
    assert run.info.status == "KILLED"
    assert sig.name in run.data.tags["error"]
    stopped_at = int(re.search(r"at step (\d+);", lines[0]).group(1))
    assert stopped_at >= 6  # it trained past the checkpoint before the signal
    assert _loss_steps(client, run_id) == list(range(1, stopped_at + 1))  # nothing left behind in memory
    assert no_running_runs(sqlite_uri) == []
    if sig != signal.SIGTERM:
        return
    resumed = _train([*args, "--resume", "true"])
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and "error" not in run.data.tags  # the stale reason is gone
    assert _loss_steps(client, run_id) == list(range(1, 41))
