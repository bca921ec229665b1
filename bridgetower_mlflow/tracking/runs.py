"""One run lifecycle: every run the project creates is created here and settled here.

train's launcher, sweep's parent and children, compare and the CLI's failure path all end a run the
same way: only if it is still RUNNING (a process that ended it knew better), with the reason as the
run's `error` tag when it did not finish and has none yet.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..contract import ERROR_TAG, ERROR_TAG_LIMIT, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND_TRAINING
from ..environment import experiment_from_environment
from ..redact import first_line, redact_text
from .failures import tracking_error

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

FINISHED, FAILED, KILLED, RUNNING = "FINISHED", "FAILED", "KILLED", "RUNNING"
log = logging.getLogger(__name__)


def create_run(client: MlflowClient, experiment_id: str, run_name: str, tags: dict[str, str]) -> str:
    """A RUNNING run (its id) that another process or a later call settles, in an experiment marked for training."""
    run_id: str = client.create_run(str(experiment_id), tags=tags, run_name=run_name).info.run_id
    mark_training_experiment(client, str(experiment_id))
    return run_id


def mark_training_experiment(client: MlflowClient, experiment_id: str) -> None:
    """The experiment opens in MLflow's UI as model training, not GenAI: its kind tag, where it has none (a kind a
    user set stays). A warning where the store refuses: the runs matter more than the view."""
    try:
        if EXPERIMENT_KIND_TAG not in client.get_experiment(experiment_id).tags:
            client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND_TRAINING)
    except Exception as exc:  # noqa: BLE001 - permissions, a server away for a moment
        log.warning("could not mark experiment %s as model training: %s", experiment_id, first_line(exc))


def create_named_run(experiment_name: str, run_name: str, tags: dict[str, str],
                     project_run_id: str | None = None) -> str:
    """A RUNNING run for others to resume (the ranks of a self-launched job); `project_run_id` when given (the
    run `mlflow run` made: MLFLOW_RUN_ID)."""
    if project_run_id:
        return project_run_id
    from mlflow.tracking import MlflowClient

    from .store_init import ready_store

    try:
        ready_store()
        return create_run(MlflowClient(), default_experiment_id(experiment_name), run_name, tags)
    except Exception as exc:  # noqa: BLE001 - server down, bad URI, permissions
        raise tracking_error("create the run", exc) from None


def default_experiment_id(experiment_name: str = "") -> str:
    """The experiment a run goes to, as MLflow's fluent start_run picks it: the name given, else MLflow's
    MLFLOW_EXPERIMENT_NAME / MLFLOW_EXPERIMENT_ID, else its Default experiment (a missing name is created).

    Through the client, not set_experiment: nothing is left active in this process for a later store's
    runs, and a name another process creates at the same moment is looked up again."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient
    from mlflow.tracking.default_experiment import DEFAULT_EXPERIMENT_ID

    name, given_id = experiment_from_environment()
    name = experiment_name or name
    client = MlflowClient()
    if not name:
        return str(client.get_experiment(given_id).experiment_id) if given_id else DEFAULT_EXPERIMENT_ID
    found = client.get_experiment_by_name(name)
    if found is not None and found.lifecycle_stage == "deleted":
        raise MlflowException(f"Cannot set a deleted experiment {name!r} as the active experiment: restore it "
                              "(mlflow experiments restore) or delete it for good to create a new one")
    if found is not None:
        return str(found.experiment_id)
    try:
        return str(client.create_experiment(name))
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        again = client.get_experiment_by_name(name)
        if again is None:
            raise
        return str(again.experiment_id)


def settle_run(client: MlflowClient, run_id: str, status: str, reason: str = "") -> Run:
    """End `run_id` with `status` if it is still RUNNING; a run that did not finish keeps a reason."""
    run = client.get_run(run_id)
    final = status if run.info.status == RUNNING else run.info.status
    if reason and final != FINISHED and ERROR_TAG not in run.data.tags:
        client.set_tag(run_id, ERROR_TAG, redact_text(reason)[:ERROR_TAG_LIMIT])
    if run.info.status == RUNNING:
        client.set_terminated(run_id, status)
    return client.get_run(run_id)
