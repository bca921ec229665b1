"""devices > 1 without an outer launcher: start the ranks ourselves and wait for them."""

from __future__ import annotations

import logging
import os
import subprocess

log = logging.getLogger(__name__)
LAUNCHED_ENV = "BRIDGETOWER_LAUNCHED"  # set in every rank this process starts


def was_self_launched() -> bool:
    """True in a rank this project started (the launcher prints the run summary, not the ranks)."""
    return os.environ.get(LAUNCHED_ENV) == "1"


def launch_ranks(command: list[str], run_id: str) -> int:
    """Run the adapter's launch command; every rank sees MLFLOW_RUN_ID, only rank 0 uses it."""
    env = dict(os.environ, MLFLOW_RUN_ID=run_id, **{LAUNCHED_ENV: "1"})
    log.info("launching ranks: %s", " ".join(command))
    return subprocess.call(command, env=env)
