"""The logged model carries the run's figures, as a user finds them: `train --register-as NAME` against a real
tracking server, then `mlflow.search_logged_models()`. Several registered runs, and every one's model holds the
final figures (samples/s, FLOPs rate, MFU where the run has it, the eval figures) at the values the run logged:
log_model links only the metrics already stored at its step, so the final ones must reach the store first. Each
train prints MLflow's run and experiment links once, and the experiment it logged into is marked as training."""

from __future__ import annotations

import os
import subprocess

import pytest

from bridgetower_mlflow.contract import EXPERIMENT_KIND_TAG, EXPERIMENT_KIND_TRAINING

from tests.conftest import BIN

pytestmark = pytest.mark.slow
RUNS = 3
FINAL = {"train_samples_per_second", "train_model_tflops_per_second", "train_runtime", "train_loss", "eval_loss",
         "eval_recall_at_1", "eval_recall_at_5"}


def test_every_registered_runs_logged_model_has_the_final_metrics(cache_dir, mlflow_server, tmp_path):
    import mlflow
    from mlflow.tracking import MlflowClient

    # the team's experiment exists already: three first trains racing to create it would meet MLflow 3.17's
    # set_experiment race (the loser's run lands in Default), which is not what this test is about
    MlflowClient(mlflow_server.url).create_experiment("figures")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    trains = [subprocess.Popen([str(BIN / "bridgetower-mlflow"), "train", "--max-steps", "4", "--logging-steps", "1",
                                "--throughput-warmup-steps", "1", "--per-device-train-batch-size", "8",
                                "--dataloader-num-workers", "0", "--experiment-name", "figures", "--register-as",
                                "figures-model", "--output-dir", str(tmp_path / f"out{i}")],
                               env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for i in range(RUNS)]  # side by side: one server, as a team's runs share one
    for train in trains:
        out, err = train.communicate(timeout=1200)
        assert train.returncode == 0, err[-3000:]
        # MLflow's links once at the end of each train (its end of the run printed them a second time)
        assert (out.count("🏃 View run "), out.count("🧪 View experiment at: ")) == (1, 1), out[-3000:]

    mlflow.set_tracking_uri(mlflow_server.url)
    client = MlflowClient(mlflow_server.url)
    experiment = client.get_experiment_by_name("figures")
    assert experiment.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND_TRAINING  # made without a kind, logged into
    runs = client.search_runs([experiment.experiment_id])
    models = mlflow.search_logged_models(experiment_ids=[experiment.experiment_id], output_format="list")
    assert len(runs) == RUNS and len(client.search_model_versions("name='figures-model'")) == RUNS
    assert sorted(m.source_run_id for m in models) == sorted(r.info.run_id for r in runs), \
        [(m.model_id, m.source_run_id, m.status) for m in models]
    for model in models:
        run = client.get_run(model.source_run_id)
        expected = FINAL | ({"train_mfu"} & set(run.data.metrics))  # MFU only where the device's peak is known
        on_model = {m.key: m.value for m in model.metrics or []}
        assert expected <= set(on_model), (model.model_id, sorted(expected - set(on_model)))
        assert {key: on_model[key] for key in expected} == {key: run.data.metrics[key] for key in expected}
    ordered = mlflow.search_logged_models(experiment_ids=[experiment.experiment_id], output_format="list",
                                          order_by=[{"field_name": "metrics.train_samples_per_second",
                                                     "ascending": False}])
    speeds = [next(m.value for m in model.metrics if m.key == "train_samples_per_second") for model in ordered]
    assert speeds == sorted(speeds, reverse=True) and len(speeds) == RUNS
