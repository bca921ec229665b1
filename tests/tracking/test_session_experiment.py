"""A run starts in the experiment it names even when another process creates that experiment at the same moment
(MLflow's set_experiment then returns it without making it active: three trains side by side saw one run land in
Default). A real sqlite store; the race is the moment between MLflow's look-up and its create."""

from __future__ import annotations

from mlflow.tracking import MlflowClient
from mlflow.tracking._tracking_service.client import TrackingServiceClient

from bridgetower_mlflow.tracking.session import RunSession


def test_a_run_lands_in_its_experiment_when_another_process_created_it_first(sqlite_uri, monkeypatch):
    experiment_id = MlflowClient(sqlite_uri).create_experiment("side-by-side")  # the other train, just now
    look_up = TrackingServiceClient.get_experiment_by_name
    calls = []

    def not_yet_on_the_first_look(self, name):  # this process looked before the other one created it
        calls.append(name)
        return None if len(calls) == 1 else look_up(self, name)

    monkeypatch.setattr(TrackingServiceClient, "get_experiment_by_name", not_yet_on_the_first_look)
    session = RunSession.start("side-by-side", "race", {})
    try:
        assert calls, "MLflow's set_experiment no longer looks the experiment up this way: the race is not staged"
        assert MlflowClient(sqlite_uri).get_run(session.run_id).info.experiment_id == experiment_id
    finally:
        session.finish("FINISHED", 30)


def test_starting_a_run_in_process_leaves_no_active_experiment_behind(tmp_path, monkeypatch):
    """Python callers (and the tests) run train and compare in one process against several stores: an experiment
    made active in one store's numbering was then the experiment of the next store's `mlflow.start_run()`."""
    import mlflow

    from bridgetower_mlflow.tracking.runs import create_named_run

    first = f"sqlite:///{tmp_path / 'first.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", first)
    mlflow.set_tracking_uri(first)
    for name in ("a", "b", "c"):  # ids 1..3 exist in the first store only
        MlflowClient(first).create_experiment(name)
    create_named_run("c", "compare", {})
    RunSession.start("b", "train", {}).finish("FINISHED", 30)
    second = f"sqlite:///{tmp_path / 'second.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", second)
    mlflow.set_tracking_uri(second)
    try:
        with mlflow.start_run() as run:  # a fresh store: its Default experiment
            assert run.info.experiment_id == "0"
    finally:
        mlflow.set_tracking_uri(None)
