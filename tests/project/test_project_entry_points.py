"""`mlflow run . -e sweep` and `mlflow run . -e compare` end to end: MLproject parameters reach the commands.

One tiny sweep (one cell) is shared: compare then reads its runs from another experiment.
"""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import mlflow_run, no_running_runs

pytestmark = pytest.mark.slow
SWEEP = {"accel": "cpu", "workers": "0", "device_decode": "false", "repeats": 1, "max_steps": 4,
         "per_device_train_batch_size": 8, "target": "eval_recall_at_5>=0.20",  # `>=` through the shell's quoting
         # not MLproject parameters: mlflow run appends them as --key value and the sweep passes them to train
         "log_model": "false", "max_train_samples": 32, "max_eval_samples": 16}


def _runs(client, experiment: str, kind: str):
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    return client.search_runs([experiment_id], f"tags.`bridgetower.run_kind` = '{kind}'")


def test_mlflow_run_sweep_then_compare(cache_dir, sqlite_uri):
    done = mlflow_run(SWEEP, "project-sweep", entry="sweep")
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(sqlite_uri)
    (parent,) = _runs(client, "project-sweep", "sweep")
    assert parent.data.tags["mlflow.project.entryPoint"] == "sweep"  # the sweep is mlflow run's own run
    assert parent.info.status == "FINISHED" and parent.data.tags["sweep.finished"] == "1"
    (child,) = _runs(client, "project-sweep", "train")
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id and child.info.status == "FINISHED"
    assert child.info.run_name == "cpu w0 decode=cpu r1"
    params = child.data.params
    assert (params["dataloader_num_workers"], params["max_steps"], params["per_device_train_batch_size"],
            params["log_model"], params["data.train_rows"]) == ("0", "4", "8", "False", "32")
    assert (params["target"], params["seed"]) == ("eval_recall_at_5>=0.2", "42")  # canonical; repeat 1: the seed
    assert parent.data.tags["sweep.target"] == "eval_recall_at_5>=0.2"
    assert "| w0 decode=cpu |" in parent.data.tags["mlflow.note.content"]
    assert {"compare/report.md", "compare/speedups.csv"} <= {a.path for a in client.list_artifacts(
        parent.info.run_id, "compare")}

    compared = mlflow_run({"experiment_name": "project-sweep", "baseline": "cpu"}, "project-compare",
                          entry="compare")
    assert compared.returncode == 0, compared.stderr[-3000:]
    assert "w0 decode=cpu" in compared.stdout
    (run,) = _runs(client, "project-compare", "compare")
    assert run.data.tags["mlflow.project.entryPoint"] == "compare" and run.info.status == "FINISHED"
    assert f"logged compare outputs on run {run.info.run_id}" in compared.stdout
    assert "w0 decode=cpu" in run.data.tags["mlflow.note.content"]
    assert "compare/report.md" in {a.path for a in client.list_artifacts(run.info.run_id, "compare")}
    assert no_running_runs(sqlite_uri) == []
