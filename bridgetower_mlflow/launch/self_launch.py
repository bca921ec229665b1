"""devices > 1 without an outer launcher: start the ranks ourselves, wait for them, and stop them with a grace.

Every launcher's stop: SIGTERM goes straight to the ranks (the launcher's own children), which then have
STOP_GRACE_SECONDS for their cleanup. Signalling the launcher instead would leave the grace to it: OpenMPI's
mpirun sends SIGCONT, sleeps odls_base_sigkill_timeout (1 s by default), sends SIGTERM, sleeps again and
SIGKILLs, so rank 0 had about a second to send or spill what it held (the Gaudi line therefore raises that
timeout to the same grace: mpirun also starts that sequence itself when one rank ends early, or when a
terminal's Ctrl-C reaches it). torchrun forwards a signal with its own 30 s. Once the ranks are gone, the
launcher itself is ended.
"""

from __future__ import annotations

import logging
import signal
import subprocess

from ..contract import STOP_GRACE_SECONDS
from ..environment import LAUNCHED_ENV, PROJECT_RUN_ENV, for_child_process
from ..errors import LaunchFailed
from ..redact import first_line
from .signals import Stopped

log = logging.getLogger(__name__)
LAUNCHER_EXIT_S = 3.0  # the launcher's own exit once its ranks are gone (it holds nothing of the run's)


def launch_ranks(command: list[str], run_id: str, grace: float = STOP_GRACE_SECONDS) -> int:
    """Run the adapter's launch command; every rank sees MLFLOW_RUN_ID, only rank 0 uses it.

    LaunchFailed (one line) when the launcher cannot start (not on PATH); on a stop signal the ranks get
    `grace` seconds, then Stopped is raised on."""
    env = {**for_child_process(), PROJECT_RUN_ENV: run_id, LAUNCHED_ENV: "1"}
    log.info("launching ranks: %s", " ".join(command))
    try:
        process = subprocess.Popen(command, env=env)
    except OSError as exc:  # mpirun on a host without OpenMPI, a launcher that is not executable
        raise LaunchFailed(f"devices: cannot start the ranks with {command[0]!r} ({exc.strerror or first_line(exc)});"
                           f" allowed: devices 1, or a PATH where {command[0]!r} runs") from None
    try:
        return process.wait()
    except Stopped:
        stop_ranks(process, grace)
        raise


def stop_ranks(launcher: subprocess.Popen, grace: float) -> None:
    """SIGTERM to the ranks (a rank a terminal's Ctrl-C already reached ignores it), `grace` seconds for
    their cleanup, SIGKILL to any still there; then the launcher goes."""
    import psutil

    try:
        ranks = psutil.Process(launcher.pid).children()
    except psutil.NoSuchProcess:
        ranks = []
    targets = ranks or _alive(launcher.pid)  # no rank started yet: the launcher stops itself
    log.warning("stopping %d ranks: SIGTERM, then up to %g s for their cleanup", len(ranks), grace)
    for process in targets:
        _send(process, signal.SIGTERM)
    _, left = psutil.wait_procs(targets, timeout=grace)
    for process in left:
        _send(process, signal.SIGKILL)
    if launcher.poll() is None:
        launcher.terminate()
        try:
            launcher.wait(timeout=LAUNCHER_EXIT_S)
        except subprocess.TimeoutExpired:  # mpirun sleeps through its own kill sequence: nothing is left to it
            launcher.kill()
            launcher.wait()


def _alive(pid: int) -> list:
    import psutil

    try:
        return [psutil.Process(pid)]
    except psutil.NoSuchProcess:
        return []


def _send(process, signum: int) -> None:
    import psutil

    try:
        process.send_signal(signum)
    except psutil.NoSuchProcess:
        pass
