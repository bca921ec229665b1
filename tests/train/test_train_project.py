"""`mlflow run . -e train` end to end (real subprocess) against sqlite and a real tracking server."""

import base64

import mlflow
import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.data.sample import default_sample_dir

from tests.conftest import REPO, mlflow_run, no_running_runs

pytestmark = pytest.mark.slow
DESIGN_TAGS = ("accelerator", "accelerator.device_name", "accelerator.count", "accelerator.memory_gb",
               "accelerator.driver", "software.torch", "software.transformers", "host.cpu_model",
               "host.cpu_count", "data_loader", "input_bound")
DESIGN_METRICS = ("train_samples_per_second", "train_samples_per_second_per_device", "train_runtime",
                  "train_loss", "eval_loss", "eval_recall_at_1", "eval_recall_at_5", "dataloader_wait_fraction",
                  "eval_caption_match_accuracy", "system/cpu_utilization_percentage",
                  "system/dataloader_workers_cpu_percentage", "system/main_process_cpu_percentage")
PARAMS = {"accel": "cpu", "max_steps": 8, "logging_steps": 2, "dataloader_num_workers": 1, "register_as": "bt-test"}
# `mlflow run` logs these itself (every entry-point parameter) before the product runs
MLPROJECT_PARAMS = set(yaml.safe_load((REPO / "MLproject").read_text())["entry_points"]["train"]["parameters"])


def _check_product_params(params: dict) -> None:
    """Params only the product logs: TrainingArguments, model config, data settings (at least 100)."""
    ours = {key: value for key, value in params.items() if key not in MLPROJECT_PARAMS}
    assert len(ours) >= 100, sorted(ours)
    train_rows = len(list((default_sample_dir() / "train").glob("*.jpg")))
    assert (ours["data.train_rows"], ours["data.image_column"], ours["data.caption_column"]) == \
        (str(train_rows), "image", "image_description")
    assert ours["data.source"].startswith("sample:") and len(ours["data.eval_fingerprint"]) == 16
    assert ours["model_config.model_type"] == "bridgetower" and ours["model_config.hidden_size"] == "64"
    assert int(ours["model_parameters"]) > 100_000
    assert (ours["use_cpu"], ours["report_to"], ours["remove_unused_columns"], ours["save_strategy"]) == \
        ("True", "[]", "False", "no")
    assert ours["hub_token"] == "***" and ours["experiment_name"] == "" and ours["lr_scheduler_type"] == "linear"


def _only_run(client, experiment):
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert len(runs) == 1
    return runs[0]


def _check_store(client, run, cache_dir):
    assert run.info.status == "FINISHED"
    params, tags, metrics = run.data.params, run.data.tags, run.data.metrics
    _check_product_params(params)
    assert (params["max_steps"], params["dataloader_num_workers"], params["register_as"]) == ("8", "1", "bt-test")
    assert all(tag in tags for tag in DESIGN_TAGS), set(DESIGN_TAGS) - set(tags)
    assert tags["accelerator"] == "cpu" and tags["data_loader"] == "torch-cpu" and tags["accelerator.count"] == "1"
    assert tags["input_bound"] in ("no", "moderate", "high")
    assert "train_samples_per_second" in tags["mlflow.note.content"]
    assert all(name in metrics for name in DESIGN_METRICS), set(DESIGN_METRICS) - set(metrics)
    assert metrics["train_samples_per_second"] > 0 and 0 <= metrics["dataloader_wait_fraction"] <= 1
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "step_samples_per_second")]
    assert steps == [2, 4, 6, 8]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [2, 4, 6, 8]
    version = client.get_model_version("bt-test", "1")
    assert version.tags["run_id"] == run.info.run_id and version.tags["accelerator"] == "cpu"
    assert float(version.tags["train_samples_per_second"]) == pytest.approx(metrics["train_samples_per_second"], 1e-4)
    image = next((default_sample_dir() / "validation").glob("*.jpg"))
    frame = pd.DataFrame([
        {"image": str(image), "caption": "A cartoon of a sun.", "caption_choices": ["a", "b", "c"]},
        {"image": base64.b64encode(image.read_bytes()).decode(), "caption": "A cartoon of a man.",
         "caption_choices": None},
    ])
    predicted = mlflow.pyfunc.load_model("models:/bt-test/1").predict(frame)
    assert list(predicted["best_choice"]) [1] == -1 and 0 <= predicted["best_choice"][0] < 3
    assert predicted["score"].between(-1, 1).all()


@pytest.mark.gaudi_stack  # the floor of transformers: the whole run and its model; a server carries it the same way
def test_mlflow_run_train_on_sqlite(cache_dir, sqlite_uri):
    done = mlflow_run(PARAMS, "e2e")
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(sqlite_uri)
    _check_store(client, _only_run(client, "e2e"), cache_dir)
    assert "open it: http://127.0.0.1:5000/#/experiments/" in done.stdout
    assert no_running_runs(sqlite_uri) == []


def test_mlflow_run_train_against_a_real_tracking_server(cache_dir, mlflow_server):
    done = mlflow_run(PARAMS, "e2e-server")
    assert done.returncode == 0, done.stderr[-3000:]
    mlflow.set_tracking_uri(mlflow_server.url)
    client = MlflowClient(mlflow_server.url)
    run = _only_run(client, "e2e-server")
    _check_store(client, run, cache_dir)
    assert f"{mlflow_server.url}/#/experiments/" in done.stdout
    mlflow.set_tracking_uri(None)
