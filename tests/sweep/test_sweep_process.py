"""A sweep never leaves train (or what train started) behind: Ctrl-C, Ray's soft cancel (a KeyboardInterrupt in
the waiting thread) and SIGTERM stop train's whole process tree, a process that ignores SIGTERM included.

Real processes: a fake train that starts workers (one ignores SIGTERM, one has a child of its own) and hangs,
the real `bridgetower-mlflow sweep` CLI, a real sqlite store."""

import _thread
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest
from mlflow import MlflowClient

from bridgetower_mlflow.sweep.process import exit_reason, run_train_process

from tests.conftest import BIN

# train: a worker that ignores SIGTERM, a worker with a child of its own; writes every pid, then hangs
TREE_TRAIN = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    ignoring = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('ready', flush=True); time.sleep(600)")
    parent = ("import subprocess, sys, time; child = subprocess.Popen(['sleep', '600']); "
              "print(child.pid, flush=True); time.sleep(600)")
    workers = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
               for code in (ignoring, parent)]
    grandchild = workers[1].stdout.readline().strip()
    workers[0].stdout.readline()
    pids = [os.getpid(), *(w.pid for w in workers), int(grandchild)]
    with open(os.environ["TREE_PIDS"] + ".tmp", "w") as handle:
        handle.write(" ".join(map(str, pids)))
    os.replace(os.environ["TREE_PIDS"] + ".tmp", os.environ["TREE_PIDS"])
    time.sleep(600)
""")


def _wait_for_pids(path, timeout=60):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"train did not write its pids to {path} within {timeout} s"
        time.sleep(0.05)
    return [int(pid) for pid in path.read_text().split()]


def _running(pids):
    """The pids still running (a zombie waiting for its reaper has ended)."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def _wait_until_gone(pids, timeout=30):
    deadline = time.monotonic() + timeout
    while _running(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _running(pids)


@pytest.fixture
def python_sigint():
    """SIGINT as Python sets it up (KeyboardInterrupt): the test worker's may be another (xdist workers can run
    with it ignored), and interrupt_main() then does nothing while train hangs its full 600 s."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupt_while_train_runs_stops_train_and_everything_it_started(tmp_path, monkeypatch, python_sigint):
    pids_file = tmp_path / "pids"
    monkeypatch.setenv("TREE_PIDS", str(pids_file))
    seen = []

    def interrupt_once_the_tree_stands():
        seen.extend(_wait_for_pids(pids_file))
        _thread.interrupt_main()  # what Ctrl-C and Ray's soft cancel do to the waiting thread

    threading.Thread(target=interrupt_once_the_tree_stands, daemon=True).start()
    started = time.monotonic()
    with open(tmp_path / "train.log", "wb") as log:
        try:
            run_train_process([sys.executable, "-c", TREE_TRAIN], dict(os.environ), log)
        except KeyboardInterrupt:
            pass
        else:
            raise AssertionError("run_train_process returned although it was interrupted")
    assert len(seen) == 4
    assert _wait_until_gone(seen) == [], f"left running: {_running(seen)} of {seen}"
    # train itself ends on SIGTERM: the worker that ignores it is killed then, not after the whole grace
    assert time.monotonic() - started < 60


def test_sigterm_to_a_sweep_stops_train_and_its_tree_and_kills_the_runs(tmp_path):
    script, pids_file = tmp_path / "tree_train.py", tmp_path / "pids"
    script.write_text(TREE_TRAIN)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    client.create_experiment("sweeps", artifact_location=str(tmp_path / "artifacts"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("MLFLOW_")}
    env.update(MLFLOW_TRACKING_URI=uri, BRIDGETOWER_TRAIN_CMD=f"{sys.executable} {script}", TREE_PIDS=str(pids_file))
    sweep = subprocess.Popen([str(BIN / "bridgetower-mlflow"), "sweep", "--workers", "0", "--device-decode", "false",
                              "--repeats", "1", "--experiment-name", "sweeps"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        pids = _wait_for_pids(pids_file, timeout=180)
        sweep.send_signal(signal.SIGTERM)  # the sweep alone, as `kill` or a scheduler sends it
        output, _ = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 1, output
    assert _wait_until_gone(pids) == [], f"left running: {_running(pids)} of {pids}"
    runs = client.search_runs([client.get_experiment_by_name("sweeps").experiment_id])
    statuses = {run.info.run_name: run.info.status for run in runs}
    assert statuses == {"sweep cpu w0": "KILLED", "cpu w0 decode=cpu r1": "KILLED"}, (statuses, output)


def test_exit_reason_names_the_signal_or_the_exit_status():
    assert exit_reason(3) == "train exited with 3"
    assert exit_reason(-signal.SIGKILL) == "train was killed by SIGKILL (exit -9)"
    assert exit_reason(None) == "train did not report an exit status"
