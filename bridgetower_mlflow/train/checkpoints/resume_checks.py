"""Before a resume touches its run: refuse in one line, or leave a whole checkpoint in output_dir/<run id>.

Refused (exit 2, the run exactly as it was: no `resumed` tag, same status): a run that does not exist, a FINISHED
run, other hyperparameters than the run logged, no whole checkpoint here nor on the tracking server. Else the
latest whole checkpoint is here: the local one, or the server's when it is newer (downloaded; `checkpoint_upload`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ResumeRefused
from .remote import ARTIFACT_DIR, RemoteCheckpoints, download, list_remote
from .resume import as_resumed, no_whole_checkpoint
from .wholeness import latest_whole, remove_torn, step_of

if TYPE_CHECKING:
    from ...config import TrainConfig
    from ..prepare import Prepared

log = logging.getLogger(__name__)


def ready_to_resume(config: TrainConfig, prepared: Prepared, run_id: str) -> None:
    """Check run `run_id` can be continued by `config`, and bring its latest whole checkpoint here."""
    from mlflow.tracking import MlflowClient

    from ...tracking.failures import tracking_error

    client = MlflowClient()
    run = _existing_run(client, run_id, bool(config.run_id))
    if run.info.status == "FINISHED":
        raise ResumeRefused("resume", "true", f"allowed only for a run that did not finish; run {run_id} is FINISHED "
                                              "(train a new run to train more)", run_id)
    _same_settings(config, prepared, run)
    run_folder = Path(config.output_dir) / run_id
    torn = remove_torn(run_folder)
    local = latest_whole(run_folder)
    try:
        remote = list_remote(client, run_id)
    except Exception as exc:  # noqa: BLE001 - server errors become one line
        raise tracking_error(f"list the checkpoints of run {run_id}", exc) from None
    local_step = (step_of(local) or 0) if local is not None else -1
    if remote.whole and remote.latest_step > local_step:
        log.info("resume: downloading %s of run %s from the tracking server", remote.whole[0], run_id)
        try:
            download(client, run_id, remote.whole[0], run_folder)
        except OSError as exc:
            raise tracking_error(f"download {remote.whole[0]}", exc) from None
    elif local is None:
        raise no_whole_checkpoint(run_folder, torn, _on_the_server(remote), run_id)


def _existing_run(client: Any, run_id: str, named: bool) -> Any:
    """The run; `named`: run_id gave its id (else last_run.json or MLFLOW_RUN_ID did)."""
    from mlflow.exceptions import MlflowException

    from ...tracking.failures import tracking_error

    try:
        return client.get_run(run_id)
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            field, value = ("run_id", run_id) if named else ("resume", "true")
            raise ResumeRefused(field, value, f"allowed: the id of a run in this tracking store (it has no run "
                                              f"{run_id})", run_id) from None
        raise tracking_error(f"read run {run_id}", exc) from None
    except Exception as exc:  # noqa: BLE001 - server down, bad URI
        raise tracking_error(f"read run {run_id}", exc) from None


def _same_settings(config: TrainConfig, prepared: Prepared, run: Any) -> None:
    """The settings that shaped the run, as it logged them (params are immutable; a resume changes none)."""
    from ...model.load import count_parameters
    from ...tracking.params import conflicts, prepare_params
    from ..record import train_params

    logged = dict(run.data.params)
    params = as_resumed(train_params(config, prepared, count_parameters(prepared.loaded.model)), logged)
    loggable, _ = prepare_params(params)
    clash = conflicts(logged, loggable)
    if clash:
        key, (old, new) = next(iter(clash.items()))
        raise ResumeRefused(key, new, f"allowed: {old!r}, the value run {run.info.run_id} was trained with (a resume "
                                      "keeps its settings; train a new run to change them)", run.info.run_id)


def _on_the_server(remote: RemoteCheckpoints) -> str:
    if remote.cut:
        names = ", ".join(Path(p).name for p in remote.cut)
        return f"; its uploads under {ARTIFACT_DIR}/ are incomplete ({names}: no completion marker)"
    return f"; the tracking server holds none under {ARTIFACT_DIR}/ either (checkpoint_upload true uploads them)"
