"""`mlflow run . -e promote` end to end: MLproject parameters reach the gate; the run records it."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import mlflow_run
from tests.promote.conftest import register, unique_name

pytestmark = pytest.mark.slow


def _project_run(client, experiment):
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert len(runs) == 1
    return runs[0]


def test_mlflow_run_promote_moves_the_alias_and_tags_its_run(store):
    name = unique_name("project")
    register(name, store.worse)
    register(name, store.better)
    done = mlflow_run({"model_name": name, "candidate": "1"}, "promote-e2e", entry="promote")
    assert done.returncode == 0, done.stderr[-2000:]
    done = mlflow_run({"model_name": name}, "promote-e2e-2", entry="promote")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{name} version 2 now holds @champion (was version 1)" in done.stdout
    client = MlflowClient(store.uri)
    assert client.get_registered_model(name).aliases == {"champion": 2}
    run = _project_run(client, "promote-e2e-2")
    assert run.info.status == "FINISHED"
    assert run.data.tags["promotion.decision"] == "promoted"
    assert run.data.tags["promotion.candidate_version"] == "2" and run.data.tags["promotion.dry_run"] == "false"


def test_mlflow_run_promote_gate_fails_the_run(store):
    name = unique_name("project")
    register(name, store.better)
    register(name, store.worse)
    assert mlflow_run({"model_name": name, "candidate": "1"}, "gate-setup", entry="promote").returncode == 0
    done = mlflow_run({"model_name": name, "fail_if_not_promoted": "true", "min_delta": "0.01"}, "gate",
                      entry="promote")
    assert done.returncode != 0
    assert "error: not promoted:" in done.stderr and "@champion stays on version 1" in done.stderr
    client = MlflowClient(store.uri)
    assert client.get_registered_model(name).aliases == {"champion": 1}
    assert _project_run(client, "gate").info.status == "FAILED"
