"""Each test starts without the tracking URI an earlier test gave MLflow's fluent API (conftest's _isolated_env):
these two run in this order in one worker (--dist loadfile keeps a file together)."""

from __future__ import annotations

import mlflow

GONE = "http://127.0.0.1:9"  # a server that is not there


def test_a_test_points_mlflow_at_its_own_server():
    mlflow.set_tracking_uri(GONE)
    assert mlflow.get_tracking_uri() == GONE


def test_the_next_test_does_not_inherit_it(monkeypatch, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert mlflow.get_tracking_uri() == uri
