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
