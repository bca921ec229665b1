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

from tests.conftest import BIN, REPO, no_running_runs

pytestmark = pytest.mark.slow
PACED = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests" / "fakes" / "slow_device"),
                                                     os.environ.get("PYTHONPATH")])),
         "BRIDGETOWER_TEST_STEP_S": "0.5"}


def _train(args, step_file=None):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **PACED,
           **({"BRIDGETOWER_TEST_STEP_FILE": str(step_file)} if step_file else {})}
    return subprocess.Popen([str(BIN / "bridgetower-mlflow"), "train", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(predicate, what, timeout=300, seen=lambda: None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"waited {timeout} s for {what}; saw {seen()}")


def _steps_taken(step_file):
    try:
        return int(step_file.read_text())
    except (OSError, ValueError):
        return 0


def _loss_steps(client, run_id):
    return sorted(m.step for m in client.get_metric_history(run_id, "loss"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_the_run_killed_with_every_step_and_a_resume_line(cache_dir, sqlite_uri, tmp_path, sig):
    client = MlflowClient(sqlite_uri)
    out = tmp_path / "out"
    args = ["--max-steps", "40", "--logging-steps", "1", "--save-steps", "5", "--per-device-train-batch-size", "8",
            "--dataloader-num-workers", "0", "--log-model", "false", "--output-dir", str(out)]
    step_file = tmp_path / "steps"
    proc = _train(args, step_file)
    try:
        run_id = _wait_for(lambda: next((r.info.run_id for r in client.search_runs(["0"])), None), "the run")
        # two steps past the checkpoint at step 5: they exist only in the buffer's memory (shipped every 5 s)
        _wait_for(lambda: _steps_taken(step_file) >= 7 or proc.poll() is not None, "7 optimizer steps",
                  seen=lambda: f"{_steps_taken(step_file)} steps")
        assert (out / run_id / "checkpoint-5" / "trainer_state.json").exists()
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        signalled_after = _steps_taken(step_file)
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
    assert stopped_at >= 6, (stopped_at, f"the signal came after {signalled_after} optimizer steps")
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
