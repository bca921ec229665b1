"""Crash and resume: which run an output folder belongs to, and which checkpoint to continue from."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import TrainConfig

import json
import logging
import os
import shlex
from pathlib import Path

from ..errors import ConfigError

log = logging.getLogger(__name__)


def remember_run(output_dir: str, run_id: str) -> None:
    """`resume=true` finds the run of the last train started in this output folder."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "last_run.json").write_text(json.dumps({"run_id": run_id}))


def last_run(output_dir: str) -> str | None:
    path = Path(output_dir) / "last_run.json"
    return json.loads(path.read_text())["run_id"] if path.exists() else None


def run_to_resume(config: TrainConfig) -> str | None:
    """The run a resume continues, found by its output folder: None for a new run.

    Not MLFLOW_RUN_ID: `mlflow run -P resume=true` creates a new project run, which only records what it resumed.
    """
    if not config.resume:
        return None
    run_id = last_run(config.output_dir)
    if not run_id:
        raise ConfigError("resume", "true", f"allowed only after a run in output_dir {config.output_dir!r} "
                          "(no last_run.json there)")
    return run_id


def project_run_of_resume(resumed_run_id: str | None) -> str | None:
    """The run `mlflow run` created for a resume that continues another run (None when there is none)."""
    outer = os.environ.get("MLFLOW_RUN_ID")
    return outer if resumed_run_id and outer and outer != resumed_run_id else None


def resume_hint(config: TrainConfig, has_checkpoint: bool) -> str:
    """How to continue an interrupted run: the same command with --resume true, or why it cannot."""
    if not has_checkpoint:
        return "it saved no checkpoint to resume from (save_steps=0 or none reached yet): train it again"
    from ..config import TrainConfig

    defaults = TrainConfig().to_fields()
    words = ["bridgetower-mlflow", "train"]
    for key, value in config.to_fields().items():
        if key != "resume" and value != defaults.get(key):
            words += [f"--{key.replace('_', '-')}", _cli_value(value)]
    return f"resume with: {shlex.join([*words, '--resume', 'true'])}"


def _cli_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def has_complete_checkpoint(run_folder: str) -> bool:
    return any(_has_state(p) for p in Path(run_folder).glob("checkpoint-*"))


def checkpoint_to_resume(config: TrainConfig, output_dir: str) -> str | None:
    """Trainer's resume_from_checkpoint: the latest complete checkpoint on a resume, else None.

    Not Trainer's own pick (`True`): it takes the highest-numbered folder, even one a SIGKILL left without
    its trainer_state.json, which Trainer writes last."""
    if not config.resume:
        return None
    found = sorted((p for p in Path(output_dir).glob("checkpoint-*") if p.name.split("-", 1)[1].isdigit()),
                   key=lambda p: int(p.name.split("-", 1)[1]), reverse=True)
    complete = next((p for p in found if _has_state(p)), None)
    if complete is None:
        raise ConfigError("resume", "true", f"allowed only with a complete checkpoint in {output_dir} "
                          "(train with save_steps>0)")
    cut_short = [p.name for p in found[:found.index(complete)]]
    if cut_short:
        log.warning("%s incomplete (a save cut short); resuming from %s", ", ".join(cut_short), complete.name)
    return str(complete)


def _has_state(checkpoint: Path) -> bool:
    try:
        return "global_step" in json.loads((checkpoint / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
