"""Every launcher's stop (issue 31): a stop signal to the self-launcher leaves the ranks the project's grace.

Real launchers around stub ranks that trap SIGTERM as train's ranks do (launch.signals), each rank's cleanup
observed through a file it writes when done. Rank 1 has nothing to save and ends at once (exit 143); rank 0
needs a few seconds (sending or spilling what it holds). Before: the launcher passed the signal to mpirun,
which SIGKILLs its ranks about a second after its own SIGTERM (odls_base_sigkill_timeout), and at once when
one rank ends: rank 0 was killed mid-cleanup. And `devices > 1` with no mpirun on PATH was a traceback and a
run left RUNNING.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.accelerators.gaudi.arguments import mpirun_command, physical_core_layout

from tests.conftest import BIN, REPO, no_running_runs, run_cli
from tests.fakes import BRIDGE

pytestmark = pytest.mark.slow
CLEANUP_S = 6.0  # rank 0's cleanup: longer than OpenMPI's default kill sequence (~2 s), well inside the grace

RANK = """
import os, sys, time
from pathlib import Path
from bridgetower_mlflow.launch.signals import Stopped, stop_signals_raise

folder, cleanup = Path(sys.argv[1]), float(sys.argv[2])
rank = os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ["RANK"]
with stop_signals_raise():
    try:
        (folder / f"started-{rank}").write_text(str(os.getpid()))
        while True:
            time.sleep(0.1)
    except Stopped as exc:
        time.sleep(cleanup if rank == "0" else 0.0)
        (folder / f"cleaned-{rank}").write_text(exc.signal_name)
        sys.exit(exc.exit_code)
"""

LAUNCHER = """
import json, sys
from bridgetower_mlflow.launch.self_launch import launch_ranks
from bridgetower_mlflow.launch.signals import Stopped, stop_signals_raise

with stop_signals_raise():
    try:
        code = launch_ranks(json.loads(sys.argv[1]), "a-run-id")
    except Stopped as exc:
        print("stopped", flush=True)
        sys.exit(exc.exit_code)
print("ended", code, flush=True)
"""


def _stub_rank(folder) -> list[str]:
    """What the launcher starts in place of `python -m bridgetower_mlflow train ...`: the stub rank."""
    stub = folder / "rank.py"
    stub.write_text(RANK)
    return [str(stub), str(folder), str(CLEANUP_S)]


def _wait_for_ranks(folder, launcher, ranks=2, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and launcher.poll() is None:
        pids = [folder / f"started-{rank}" for rank in range(ranks)]
        if all(p.exists() and p.read_text() for p in pids):
            return [int(p.read_text()) for p in pids]
        time.sleep(0.2)
    out, err = launcher.communicate(timeout=30) if launcher.poll() is not None else ("", "")
    raise AssertionError(f"the ranks did not start within {timeout} s (launcher exit {launcher.poll()}): {err[-3000:]}")


def _stop_and_check(command: list[str], folder) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, json.dumps(command)], cwd=folder, env=env,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pids = _wait_for_ranks(folder, launcher)
        launcher.send_signal(signal.SIGTERM)  # a scheduler stops the job (Kubernetes, Slurm, Ray)
        out, err = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 128 + signal.SIGTERM and out.strip().endswith("stopped"), err[-3000:]
    cleaned = {rank: (folder / f"cleaned-{rank}").read_text() if (folder / f"cleaned-{rank}").exists() else None
               for rank in (0, 1)}
    assert cleaned == {0: "SIGTERM", 1: "SIGTERM"}, (cleaned, err[-3000:])  # rank 0 finished its cleanup
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def test_mpirun_ranks_get_the_grace_to_finish_their_cleanup(tmp_path):
    """Gaudi's self-launch line (gaudi_spawn's), the real OpenMPI from Debian's openmpi-bin."""
    assert shutil.which("mpirun"), "OpenMPI's mpirun is not on PATH: install Debian's openmpi-bin (make install-test)"
    cores, per_socket = physical_core_layout()
    line = mpirun_command(2, [], physical_cores=cores, cores_per_socket=per_socket)
    line = line[:1] + ["--oversubscribe"] + line[1:]  # two ranks on a machine whose cores other tests also use
    _stop_and_check(line[:line.index(sys.executable) + 1] + _stub_rank(tmp_path), tmp_path)


def test_torchrun_ranks_get_the_grace_to_finish_their_cleanup(tmp_path):
    """The default self-launch line (CPU and NVIDIA): torchrun."""
    from bridgetower_mlflow.accelerators.base import DeviceInfo
    from bridgetower_mlflow.accelerators.cpu import CpuAccelerator

    line = CpuAccelerator("cpu").launch_command(DeviceInfo("cpu", "cpu", 2), [])
    _stop_and_check(line[:line.index("bridgetower_mlflow") - 1] + _stub_rank(tmp_path), tmp_path)


def test_devices_2_with_no_mpirun_on_path_is_one_line_and_a_failed_run(tmp_path, sqlite_uri, cache_dir):
    """What a Gaudi host without OpenMPI meets (the Habana stack's fake; mpirun absent from PATH)."""
    done = run_cli(["train", "--accel", "gaudi2", "--devices", "2", "--max-steps", "2", "--log-model", "false"],
                   env_extra={"PATH": str(BIN), "PYTHONPATH": str(BRIDGE), "FAKE_HPU_COUNT": "2"}, timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and lines[-1].startswith(
        "error: devices: cannot start the ranks with 'mpirun' (No such file or directory); allowed: devices 1"), \
        done.stderr[-3000:]
    (run,) = MlflowClient(sqlite_uri).search_runs(["0"])
    assert run.info.status == "FAILED" and run.data.tags["error"] == lines[-1].removeprefix("error: ")
    assert no_running_runs(sqlite_uri) == []
