"""Resume through `mlflow run`: SIGKILL a project run mid-training, then `mlflow run -P resume=true` continues
the killed run (found by its output folder, not by the new run's id) with every step once; the new project
run says which run it resumed and ends in the same state."""

import os
import signal
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import BIN, REPO, no_running_runs

pytestmark = pytest.mark.slow


def _mlflow_run(params, **popen):
    args = [str(BIN / "mlflow"), "run", str(REPO), "-e", "train", "--env-manager", "local",
            "--experiment-name", "resume-project"]
    for key, value in params.items():
        args += ["-P", f"{key}={value}"]
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "BRIDGETOWER_TEST_STEP_S": "0.5",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests" / "fakes" / "slow_device"),
                                                       os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(args, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def test_sigkill_then_mlflow_run_resume_continues_the_killed_run(cache_dir, sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    out = tmp_path / "out"
    params = {"max_steps": 24, "logging_steps": 1, "save_steps": 5, "per_device_train_batch_size": 8,
              "dataloader_num_workers": 0, "log_model": "false", "output_dir": str(out)}
    first = _mlflow_run(params, start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        while not list(out.glob("*/checkpoint-10/trainer_state.json")):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()[1][-3000:]
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    finally:
        first.kill()
    (killed,) = client.search_runs([client.get_experiment_by_name("resume-project").experiment_id])
    killed_id = killed.info.run_id
    assert killed.info.status == "RUNNING"  # nobody was left to end it

    again = _mlflow_run({**params, "resume": "true"})
    _, err = again.communicate(timeout=900)
    assert again.returncode == 0, err[-3000:]
    runs = {r.info.run_id: r for r in client.search_runs([killed.info.experiment_id])}
    assert len(runs) == 2
    (project_id,) = set(runs) - {killed_id}
    resumed, project = client.get_run(killed_id), client.get_run(project_id)
    assert resumed.info.status == "FINISHED" and resumed.data.tags["resumed"] == "true"
    steps = sorted(m.step for m in client.get_metric_history(killed_id, "loss"))
    assert steps == list(range(1, 25))  # every step once, in the run that trained them
    assert project.info.status == "FINISHED"
    assert project.data.tags["resumed.run"] == killed_id
    assert killed_id in project.data.tags["mlflow.note.content"]
    assert no_running_runs(sqlite_uri) == []
