"""devices > 1 without an outer launcher: start the ranks ourselves and wait for them."""

from __future__ import annotations

import logging
import os
import subprocess

from .signals import Stopped

log = logging.getLogger(__name__)
LAUNCHED_ENV = "BRIDGETOWER_LAUNCHED"  # set in every rank this process starts
STOP_GRACE_SECONDS = 25.0  # the ranks' own cleanup (flush or spill, end the run) after a stop signal


def was_self_launched() -> bool:
    """True in a rank this project started (the launcher prints the run summary, not the ranks)."""
    return os.environ.get(LAUNCHED_ENV) == "1"


def launch_ranks(command: list[str], run_id: str) -> int:
    """Run the adapter's launch command; every rank sees MLFLOW_RUN_ID, only rank 0 uses it."""
    env = dict(os.environ, MLFLOW_RUN_ID=run_id, **{LAUNCHED_ENV: "1"})
    log.info("launching ranks: %s", " ".join(command))
    process = subprocess.Popen(command, env=env)
    try:
        return process.wait()
    except Stopped as exc:  # the ranks get the same signal, so rank 0 spills and ends the run itself
        process.send_signal(exc.signum)
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise
