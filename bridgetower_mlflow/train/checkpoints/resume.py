"""Crash and resume: which run an output folder belongs to, and which checkpoint to continue from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...config import TrainConfig

import json
import logging
import os
import shlex
from pathlib import Path

from ...errors import ConfigError, ResumeRefused
from .wholeness import latest_whole, remove_torn

log = logging.getLogger(__name__)


def remember_run(output_dir: str, run_id: str) -> None:
    """`resume=true` finds the run of the last train started in this output folder."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / ".last_run.json.partial"
    partial.write_text(json.dumps({"run_id": run_id}))
    os.replace(partial, folder / "last_run.json")  # a full disk leaves the earlier file whole, never half of one


def last_run(output_dir: str) -> str | None:
    path = Path(output_dir) / "last_run.json"
    try:
        return str(json.loads(path.read_text())["run_id"]) if path.exists() else None
    except (ValueError, KeyError, TypeError):
        log.warning("%s is unreadable (a write cut short); it names no run to resume", path)
        return None


def run_to_resume(config: TrainConfig, project_run_id: str | None) -> str | None:
    """The run a resume continues: `run_id`, else the one last_run.json of the output folder names, else
    `project_run_id`, MLFLOW_RUN_ID (a pod or cell restarted on an empty disk with its run's id); None for a new
    run.

    last_run.json before MLFLOW_RUN_ID: `mlflow run -P resume=true` creates a new project run, which only records
    what it resumed."""
    if not config.resume:
        return None
    run_id = config.run_id or last_run(config.output_dir) or project_run_id
    if not run_id:
        raise ConfigError("resume", "true", f"allowed only after a run in output_dir {config.output_dir!r} "
                          "(no last_run.json there), or with run_id naming the run to continue")
    return run_id


LOCATION_PARAMS = ("output_dir", "logging_dir")  # where a run writes, not what shaped it: a resume may move


def as_resumed(params: dict[str, Any], logged: dict[str, str]) -> dict[str, Any]:
    """A resume's params: its own, but the folders the run logged when it started (a resume elsewhere, on an
    empty disk, keeps the run's params; the log says where it continued)."""
    return {**params, **{key: logged[key] for key in LOCATION_PARAMS if key in params and key in logged}}


def project_run_of_resume(resumed_run_id: str | None, project_run_id: str | None) -> str | None:
    """The run `mlflow run` created (MLFLOW_RUN_ID) for a resume that continues another run (None when there is
    none)."""
    return project_run_id if resumed_run_id and project_run_id and project_run_id != resumed_run_id else None


def resume_hint(config: TrainConfig, has_checkpoint: bool) -> str:
    """How to continue an interrupted run: the same command with --resume true, or why it cannot."""
    if not has_checkpoint:
        return "it left no complete checkpoint to resume from (save_steps=0, or none saved whole yet): train it again"
    from ...config import TrainConfig

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
    return latest_whole(run_folder) is not None


def checkpoint_to_resume(config: TrainConfig, run_folder: str) -> str | None:
    """Trainer's resume_from_checkpoint: the latest whole checkpoint on a resume, else None.

    Not Trainer's own pick (`True`): it takes the highest-numbered folder, even one a kill or a full disk cut
    short. Torn ones are removed first, each named in a warning."""
    if not config.resume:
        return None
    torn = remove_torn(run_folder)
    whole = latest_whole(run_folder)
    if whole is None:
        raise no_whole_checkpoint(run_folder, torn)
    return str(whole)


def no_whole_checkpoint(run_folder: str | Path, torn: list[str], elsewhere: str = "", run_id: str = ""
                        ) -> ResumeRefused:
    """The refusal of a resume with nothing whole to continue from: incomplete checkpoints, or none at all."""
    if torn:
        found = f"the checkpoints found in {str(run_folder)!r} were incomplete ({', '.join(torn)}: saves cut short)"
    else:
        found = f"{str(run_folder)!r} holds no checkpoint (train with save_steps>0, or wait for the first save)"
    return ResumeRefused("resume", "true", f"allowed only with a complete checkpoint; {found}{elsewhere}", run_id)
