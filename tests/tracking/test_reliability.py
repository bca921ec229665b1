"""Against real processes, under MLflow's default retries and timeouts: a tracking-server outage
mid-training, a server gone for good (upload-spill), a spill replayed by the next run, and SIGKILL at
five points of one run, each resumed."""

import os
import signal
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import BIN, REPO, MlflowServer, no_running_runs

pytestmark = pytest.mark.slow
STEP_KEYS = ("loss", "step_samples_per_second", "step_dataloader_wait_fraction")
INTERVAL_S = 2.0  # the monitor's sampling interval (MLflow's own variable sets it)
STEP_S = 0.5  # paced steps: on an idle machine the tiny preset would end a run inside one 5 s shipment
PACED = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests" / "fakes" / "slow_device"),
                                                     os.environ.get("PYTHONPATH")])),
         "BRIDGETOWER_TEST_STEP_S": str(STEP_S)}


def _train(args, log_path=None, env_extra=None, **popen):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}",
           "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": str(INTERVAL_S), **(env_extra or {})}
    # with a log file, stdout goes to <log>.stdout: a pipe nobody reads until the end would block the run once full
    err = open(log_path, "w") if log_path else subprocess.PIPE
    out = open(_stdout_of(log_path), "w") if log_path else subprocess.PIPE
    return subprocess.Popen([str(BIN / "bridgetower-mlflow"), "train", *args], env=env, text=True,
                            stdout=out, stderr=err, **popen)


def _stdout_of(log_path):
    return log_path.with_name(log_path.name + ".stdout")


def _wait_for(predicate, what="the condition", timeout=400, interval=0.5, seen=lambda: None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"waited {timeout} s for {what}; saw {seen()}")


def _history(client, run_id, key):
    return sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)


def _steps(client, run_id, key):
    return [m.step for m in _history(client, run_id, key)]


def _one_run(client):
    runs = client.search_runs(["0"])
    return runs[0].info.run_id if len(runs) == 1 else None


def test_server_outage_mid_training_loses_nothing(cache_dir, tmp_path, monkeypatch):
    server = MlflowServer(f"sqlite:///{tmp_path / 'outage.db'}", tmp_path / "artifacts").start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    client = MlflowClient(server.url)
    steps, hold, step_file = 100, tmp_path / "hold", tmp_path / "steps"
    hold.touch()  # step 90 lasts until the server is back, however long it takes to start again
    proc = _train(["--max-steps", str(steps), "--logging-steps", "1", "--per-device-train-batch-size", "8",
                   "--dataloader-num-workers", "0", "--log-model", "false"], tmp_path / "train.log",
                  env_extra={"BRIDGETOWER_FLUSH_TIMEOUT": "240", **PACED, "BRIDGETOWER_TEST_STEP_FILE": str(step_file),
                             "BRIDGETOWER_TEST_HOLD_FILE": str(hold), "BRIDGETOWER_TEST_HOLD_AT": "90"})
    try:
        run_id = _wait_for(lambda: _one_run(client), "the run")
        _wait_for(lambda: len(_steps(client, run_id, "loss")) >= 3, "3 losses in the store")
        server.stop()
        down, at_down = time.time(), _steps_taken(step_file)
        # the server stays away at least 35 s (the sender backs off and buffers), and training goes on meanwhile
        _wait_for(lambda: (time.time() - down >= 35 and _steps_taken(step_file) >= at_down + 5)
                  or proc.poll() is not None,
                  "35 s and 5 steps of training while the server is away", seen=lambda: _steps_taken(step_file))
        assert proc.poll() is None, (tmp_path / "train.log").read_text()[-3000:]
        server.start()
        up = time.time()
        # a system sample taken after the server is back has reached the store: the run then ends
        _wait_for(lambda: _sampled_after(client, run_id, up), "a system sample taken after the server is back",
                  seen=lambda: _steps_taken(step_file))
        hold.unlink()
        assert proc.wait(timeout=900) == 0, (tmp_path / "train.log").read_text()[-3000:]
    finally:
        proc.kill()
    try:
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED"
        for key in STEP_KEYS:
            assert _steps(client, run_id, key) == list(range(1, steps + 1)), key
        during = [m for m in _history(client, run_id, "loss") if down * 1000 < m.timestamp < up * 1000]
        assert during, "the run must overlap the outage"
        assert "train_samples_per_second" in run.data.metrics and "eval_loss" in run.data.metrics
        assert run.data.tags["input_bound"] in ("no", "moderate", "high")  # end-of-run tags arrived
        assert run.data.tags["mlflow.note.content"].startswith("**cpu**")  # and the description
        for key in ("system/cpu_utilization_percentage", "system/system_memory_usage_megabytes",
                    "system/main_process_cpu_percentage"):  # MLflow's collectors and the project's own
            _no_hole(_history(client, run_id, key), key, down, up)
        print(f"outage: {up - down:.1f} s, {len(during)} steps logged during it")
    finally:
        server.stop()


def _steps_taken(step_file):
    """Optimizer steps the paced run has taken (tests/fakes/slow_device writes them)."""
    try:
        return int(step_file.read_text())
    except (OSError, ValueError):
        return 0


def _sampled_after(client, run_id, moment):
    series = client.get_metric_history(run_id, "system/cpu_utilization_percentage")
    return any(m.timestamp > moment * 1000 for m in series)


def _no_hole(series, key, down, up):
    """One sample per step from before the outage to after it, none more than two intervals after the previous."""
    assert [m.step for m in series] == list(range(len(series))), key
    assert series[0].timestamp < down * 1000 and series[-1].timestamp > up * 1000, key
    for a, b in zip(series, series[1:]):
        gap = (b.timestamp - a.timestamp) / 1000
        where = (f"{key}: {gap:.2f} s between steps {a.step} and {b.step}, from {a.timestamp / 1000 - down:+.1f} s "
                 f"after the server went away ({up - down:.1f} s outage)")
        assert gap <= 2 * INTERVAL_S + 0.5, where


def _spilled_steps(spill, key):
    from bridgetower_mlflow.tracking.records import MetricRecord, from_line

    if not spill.exists():
        return []
    records = [from_line(line)[1] for line in spill.read_text().splitlines() if line.strip()]
    return [r.step for r in records if isinstance(r, MetricRecord) and r.key == key]


def test_spills_of_a_killed_run_and_of_a_server_gone_for_good_are_recorded(cache_dir, tmp_path, monkeypatch):
    db = f"sqlite:///{tmp_path / 'gone.db'}"
    server = MlflowServer(db, tmp_path / "artifacts").start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    client, spills = MlflowClient(server.url), cache_dir / "spill"
    base = ["--logging-steps", "1", "--per-device-train-batch-size", "8", "--dataloader-num-workers", "0",
            "--log-model", "false", "--output-dir", str(tmp_path / "out"), "--save-steps", "10"]
    # 1. killed while the server is away: what its checkpoint covered waits on disk for the next run here
    dead = _train([*base, "--max-steps", "400", "--run-name", "dead"], tmp_path / "dead.log", start_new_session=True)
    dead_id = _wait_for(lambda: _one_run(client))
    _wait_for(lambda: len(_steps(client, dead_id, "loss")) >= 3)
    server.stop()
    out = tmp_path / "out" / dead_id

    def checkpoint_on_disk():  # a checkpoint after the outage began: its persist() put its steps on disk
        spilled = _spilled_steps(spills / f"{dead_id}.spill.jsonl", "loss")
        return max((s for s in spilled if s % 10 == 0 and _checkpointed(out, s)), default=None)

    covered = _wait_for(lambda: checkpoint_on_disk() or dead.poll() is not None)
    assert dead.poll() is None, (tmp_path / "dead.log").read_text()[-2000:]
    os.killpg(dead.pid, signal.SIGKILL)
    dead.wait()
    server.start()
    # 2. the next run replays it at its start, then loses its server for good
    steps = 80
    gone = _train([*base, "--max-steps", str(steps), "--run-name", "gone"], tmp_path / "gone.log",
                  env_extra={"BRIDGETOWER_FLUSH_TIMEOUT": "10", **PACED})  # still training when the server goes
    gone_id = _wait_for(lambda: [r.info.run_id for r in client.search_runs(["0"], "attributes.run_name = 'gone'")])[0]
    _wait_for(lambda: len(_steps(client, gone_id, "loss")) >= 2)  # its run is created before the replay, logs after
    assert set(range(1, covered + 1)) <= set(_steps(client, dead_id, "loss"))  # replayed before the new run logged
    assert sorted(set(_steps(client, dead_id, "loss"))) == _steps(client, dead_id, "loss")  # each step once
    server.stop()
    gone.wait(timeout=900)
    error = (tmp_path / "gone.log").read_text().strip().splitlines()[-1]
    assert gone.returncode == 2 and error.startswith("error: tracking: the run trained, but "), error
    assert "(not recorded yet: tracking server away)" in _stdout_of(tmp_path / "gone.log").read_text()
    spill = error.rsplit(" ", 1)[-1]
    assert spill == str(spills / f"{gone_id}.spill.jsonl")
    # 3. the server is back (hours later, say): upload-spill records the run as it ended
    server.start()
    upload = subprocess.run([str(BIN / "bridgetower-mlflow"), "upload-spill", spill], capture_output=True, text=True,
                            timeout=300, env={**os.environ})
    assert upload.returncode == 0 and f"to 1 run(s): {gone_id}" in upload.stdout, upload.stderr[-2000:]
    run = client.get_run(gone_id)
    assert run.info.status == "FINISHED" and run.data.tags["input_bound"] in ("no", "moderate", "high")
    assert run.data.tags["mlflow.note.content"].startswith("**cpu**") and "eval_loss" in run.data.metrics
    for key in STEP_KEYS:
        assert _steps(client, gone_id, key) == list(range(1, steps + 1)), key
    assert no_running_runs(db) == [dead_id]  # the killed one stays RUNNING until it is resumed
    server.stop()


def _checkpointed(folder, step):
    return (folder / f"checkpoint-{step}" / "trainer_state.json").exists()


def _latest_checkpoint(folder):
    return max((int(p.parent.name.split("-")[1]) for p in folder.glob("checkpoint-*/trainer_state.json")), default=0)


def test_sigkill_at_five_points_then_resume_logs_every_step_once(cache_dir, sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    steps, out = 60, tmp_path / "out"
    args = ["--max-steps", str(steps), "--logging-steps", "1", "--save-steps", "10", "--per-device-train-batch-size",
            "8", "--dataloader-num-workers", "0", "--output-dir", str(out)]
    logs = [tmp_path / f"attempt-{i}.log" for i in range(6)]
    step_files = [tmp_path / f"attempt-{i}.steps" for i in range(6)]
    folder = {}

    def run_folder():
        run_id = _one_run(client)
        folder["path"] = out / run_id if run_id else None
        return run_id

    shipment = {}

    def shipped_mid_window(log, before):
        """A periodic shipment of this attempt landed past its last checkpoint, and the attempt has trained two
        steps since it saw that: those wait in memory for the next shipment (every 5 s)."""
        taken = _steps_taken(step_files[1])
        if "seen_at" not in shipment:
            shipped, checkpoint = max(_steps(client, run_id, "loss"), default=0), _latest_checkpoint(folder["path"])
            looks = shipment.setdefault("looks", [])
            if not looks or looks[-1] != (shipped, checkpoint):
                looks.append((shipped, checkpoint))
            if shipped > max(before, checkpoint):
                shipment["seen_at"] = taken
            return False
        return taken >= shipment["seen_at"] + 2

    def saved_its_own_checkpoint(log, before):
        resumed = _resume_step(log)
        return resumed is not None and _checkpointed(folder["path"], int(resumed) + 10)

    kill_points = [  # (what, when): each attempt is killed when its condition holds
        ("right after the checkpoint at step 10", lambda log, before: _checkpointed(folder["path"], 10)),
        ("between two shipments", shipped_mid_window),
        ("during training, past a checkpoint the attempt saved", saved_its_own_checkpoint),
        ("during evaluation", lambda log, before: "evaluating on" in log.read_text()),
        ("while the model is logged", lambda log, before: (folder["path"] / "final-model").exists()),
    ]
    resumed_from, run_id = [], None
    for attempt, (what, condition) in enumerate(kill_points):
        before = max(_steps(client, run_id, "loss"), default=0) if run_id else 0
        # attempt 1: a checkpoint (10 steps) every 3.7 s against a shipment every 5 s. At 0.5 s a step both came
        # every 5 s (the pace absorbs the save) and stayed in phase: every shipment of an attempt landed just after
        # a checkpoint, before the next step was logged, and the attempt ended before one landed past it
        pace = {"BRIDGETOWER_TEST_STEP_S": "0.37"} if attempt == 1 else {}
        proc = _train([*args, *(["--resume", "true"] if attempt else [])], logs[attempt], start_new_session=True,
                      env_extra={**PACED, **pace, "BRIDGETOWER_TEST_STEP_FILE": str(step_files[attempt])})
        run_id = _wait_for(run_folder, "the run")
        _wait_for(lambda c=condition, log=logs[attempt], p=proc, b=before: c(log, b) or p.poll() is not None,
                  what, interval=0.05, seen=lambda a=attempt: f"{_steps_taken(step_files[a])} steps in this attempt")
        assert proc.poll() is None, f"attempt {attempt} ended before '{what}' (the server's last loss step and " \
            f"the last checkpoint, as they changed: {shipment.get('looks')}): {logs[attempt].read_text()[-2000:]}"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        resumed_from.append(_resume_step(logs[attempt]))
    final = _train([*args, "--resume", "true"], logs[5], env_extra=PACED)
    assert final.wait(timeout=900) == 0, logs[5].read_text()[-3000:]
    resumed_from.append(_resume_step(logs[5]))
    assert _one_run(client) == run_id
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["resumed"] == "true"
    for key in STEP_KEYS:
        assert _steps(client, run_id, key) == list(range(1, steps + 1)), key  # every step, exactly once
    resumes = [int(step) for step in resumed_from[1:]]  # each attempt after the first continued from a checkpoint
    assert resumed_from[0] is None and None not in resumed_from[1:], resumed_from
    assert resumes == sorted(resumes) and resumes[0] >= 10 and resumes[-1] == steps, resumes
    assert run.data.tags["resumed.from_step"] == str(steps)
    assert no_running_runs(sqlite_uri) == []
    print("kill points:", [what for what, _ in kill_points], "resumed from steps:", resumes,
          "attempt 1's (server's last loss step, last checkpoint) as they changed:", shipment["looks"])


def _resume_step(log):
    for line in log.read_text().splitlines():
        if "resumed at step" in line:
            return line.rsplit(" ", 1)[-1]
    return None


def test_resume_with_a_different_learning_rate_is_refused(cache_dir, sqlite_uri, tmp_path):
    out = tmp_path / "out"
    args = ["--max-steps", "400", "--save-steps", "5", "--per-device-train-batch-size", "8", "--dataloader-num-workers",
            "0", "--log-model", "false", "--output-dir", str(out)]
    stopped = _train(args, log_path=tmp_path / "first.log", start_new_session=True)
    _wait_for(lambda: list(out.glob("*/checkpoint-5/trainer_state.json")) or stopped.poll() is not None,
              "checkpoint 5", seen=lambda: (tmp_path / "first.log").read_text()[-2000:])
    os.killpg(stopped.pid, signal.SIGTERM)  # a run that did not finish: the one kind a resume may continue
    stopped.wait(timeout=300)
    client = MlflowClient(sqlite_uri)
    run_id = _one_run(client)
    assert client.get_run(run_id).info.status == "KILLED", (tmp_path / "first.log").read_text()[-3000:]
    again = _train([*args, "--resume", "true", "--learning-rate", "5e-5"])
    _, err = again.communicate(timeout=600)
    assert again.returncode == 2
    assert err.strip().splitlines()[-1].startswith("error: learning_rate: invalid value '5e-05'; allowed: '1e-05'")
    assert no_running_runs(sqlite_uri) == []
    assert client.get_run(run_id).info.status == "KILLED"  # left as it was


def test_outage_under_the_product_defaults_with_another_stores_leftovers(cache_dir, tmp_path, monkeypatch):
    """As users run it: MLflow's and the product's default timeouts, no hold file, and a spill folder shared
    with another store (its leftovers must neither break this run nor be lost)."""
    from bridgetower_mlflow.tracking.records import MetricRecord, StatusRecord, to_line

    other_uri = f"sqlite:///{tmp_path / 'other.db'}"
    other = MlflowClient(other_uri)
    other_id = other.create_run(other.create_experiment("elsewhere")).info.run_id
    leftover = cache_dir / "spill" / f"{other_id}.spill.jsonl"
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_text("".join(to_line(other_id, MetricRecord("loss", 0.5, 1_700_000_000_000 + i, i))
                                for i in range(1, 4)) + to_line(other_id, StatusRecord("FINISHED", 1_700_000_000_100)))
    server = MlflowServer(f"sqlite:///{tmp_path / 'outage.db'}", tmp_path / "artifacts").start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    client, steps = MlflowClient(server.url), 80
    step_file = tmp_path / "steps"
    proc = _train(["--max-steps", str(steps), "--logging-steps", "1", "--per-device-train-batch-size", "8",
                   "--dataloader-num-workers", "0", "--log-model", "false"], tmp_path / "train.log",
                  env_extra={**PACED, "BRIDGETOWER_TEST_STEP_FILE": str(step_file)})
    try:
        run_id = _wait_for(lambda: _one_run(client), "the run")
        _wait_for(lambda: len(_steps(client, run_id, "loss")) >= 3, "3 losses in the store")
        server.stop()
        down, at_down = time.monotonic(), _steps_taken(step_file)
        # 20 s away, with training going on meanwhile (or over: its end waits for the server, 120 s by default)
        _wait_for(lambda: time.monotonic() - down >= 20 and _steps_taken(step_file) >= min(steps, at_down + 3)
                  or proc.poll() is not None, "20 s and 3 steps while the server is away",
                  seen=lambda: _steps_taken(step_file))
        server.start()
        assert proc.wait(timeout=900) == 0, (tmp_path / "train.log").read_text()[-3000:]
    finally:
        proc.kill()
        server.stop()
    server.start()
    try:
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED" and "eval_loss" in run.data.metrics
        for key in STEP_KEYS:
            assert _steps(client, run_id, key) == list(range(1, steps + 1)), key
    finally:
        server.stop()
    assert leftover.exists()  # not this store's: kept for its own store
    upload = subprocess.run([str(BIN / "bridgetower-mlflow"), "upload-spill", str(leftover)], capture_output=True,
                            text=True, timeout=300, env={**os.environ, "MLFLOW_TRACKING_URI": other_uri})
    assert upload.returncode == 0, upload.stderr[-2000:]
    assert _steps(other, other_id, "loss") == [1, 2, 3] and other.get_run(other_id).info.status == "FINISHED"
