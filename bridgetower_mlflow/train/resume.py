"""Crash and resume: which run an output folder belongs to, and which checkpoint to continue from."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ConfigError


def remember_run(output_dir: str, run_id: str) -> None:
    """`resume=true` finds the run of the last train started in this output folder."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "last_run.json").write_text(json.dumps({"run_id": run_id}))


def last_run(output_dir: str) -> str | None:
    path = Path(output_dir) / "last_run.json"
    return json.loads(path.read_text())["run_id"] if path.exists() else None


def run_to_resume(config) -> str | None:
    """The run a resume continues (None for a new run, or when mlflow run / a sweep names it)."""
    if not config.resume or os.environ.get("MLFLOW_RUN_ID"):
        return None
    run_id = last_run(config.output_dir)
    if not run_id:
        raise ConfigError("resume", "true", f"allowed only after a run in output_dir {config.output_dir!r} "
                          "(no last_run.json there)")
    return run_id


def checkpoint_to_resume(config, output_dir: str):
    """Trainer's resume_from_checkpoint: True (its latest checkpoint) on a resume, else None."""
    if not config.resume:
        return None
    if not any(Path(output_dir).glob("checkpoint-*")):
        raise ConfigError("resume", "true", f"allowed only with a checkpoint in {output_dir} (train with save_steps>0)")
    return True
