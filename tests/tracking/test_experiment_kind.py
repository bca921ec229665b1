"""The project's experiments open in MLflow's UI as model training, not GenAI: the `mlflow.experimentKind` tag
(contract.EXPERIMENT_KIND_TRAINING) on every experiment a train, sweep or compare creates or logs into without one;
a kind a user set stays. A real sqlite store; the browser's view of it is in tests/tracking/test_ui.py."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from bridgetower_mlflow.contract import EXPERIMENT_KIND_TAG, EXPERIMENT_KIND_TRAINING
from bridgetower_mlflow.tracking.runs import create_named_run, create_run
from bridgetower_mlflow.tracking.session import RunSession


def _kind(uri: str, name: str) -> str | None:
    return MlflowClient(uri).get_experiment_by_name(name).tags.get(EXPERIMENT_KIND_TAG)


def test_an_experiment_a_train_creates_opens_as_training(sqlite_uri):
    RunSession.start("made-by-train", "train", {}).finish("FINISHED", 30)
    assert _kind(sqlite_uri, "made-by-train") == EXPERIMENT_KIND_TRAINING


def test_an_existing_experiment_without_a_kind_gets_one_and_a_users_kind_stays(sqlite_uri):
    client = MlflowClient(sqlite_uri)
    client.create_experiment("team")  # made before the project logged there: no kind
    chosen = client.create_experiment("chosen", tags={EXPERIMENT_KIND_TAG: "finetuning"})
    create_named_run("team", "a launcher's run", {})
    create_run(client, chosen, "a sweep's parent", {})
    RunSession.start("chosen", "train", {}).finish("FINISHED", 30)
    assert _kind(sqlite_uri, "team") == EXPERIMENT_KIND_TRAINING
    assert _kind(sqlite_uri, "chosen") == "finetuning"


def test_the_default_experiment_a_run_lands_in_is_marked_too(sqlite_uri):
    RunSession.start("", "train", {}).finish("FINISHED", 30)
    assert MlflowClient(sqlite_uri).get_experiment("0").tags.get(EXPERIMENT_KIND_TAG) == EXPERIMENT_KIND_TRAINING
