"""Time to quality as a user meets it: `mlflow run . -e train -P eval_steps=N -P target=...` on a real sqlite store,
the evaluated checkpoints as LoggedModels, the best one registered; an unreachable target; a bad one.

The sample set is learnable in seconds at learning rate 3e-3 (the tiny preset, batch 16): eval_loss falls from
ln(16) = 2.77 (chance with 16 in-batch negatives) to about 2.47 by step 50, so `eval_loss<=2.6` is a real target
reached in a CPU-friendly time. (recall@k stays at chance for hundreds of steps: the random-init text tower starts
with nearly the same embedding for every caption.)
"""

from __future__ import annotations

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import mlflow_run, no_running_runs, run_cli

pytestmark = pytest.mark.slow
TARGET = "eval_loss<=2.6"
LEARNS = {"accel": "cpu", "learning_rate": "3e-3", "per_device_train_batch_size": 16, "max_seq_length": 32,
          "dataloader_num_workers": 0, "throughput_warmup_steps": 1, "logging_steps": 10}


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]


def test_mlflow_run_stops_at_its_target_and_logs_the_race(cache_dir, sqlite_uri):
    params = {**LEARNS, "max_steps": 120, "eval_steps": 10, "save_steps": 10, "target": TARGET,
              "register_as": "ttq"}
    done = mlflow_run(params, "quality")
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(sqlite_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("quality").experiment_id])
    metrics, tags, run_id = run.data.metrics, run.data.tags, run.info.run_id
    assert run.info.status == "FINISHED" and (tags["target"], tags["target.reached"]) == ("eval_loss<=2.6", "true")

    losses = _history(client, run_id, "eval_loss")
    steps = [step for step, _ in losses]
    assert steps == list(range(10, steps[-1] + 1, 10)) and steps[-1] < 120  # stopped at the first that reached it
    assert [loss <= 2.6 for _, loss in losses] == [False] * (len(losses) - 1) + [True]
    clock = _history(client, run_id, "eval_clock_seconds")
    assert [step for step, _ in clock] == steps and [s for _, s in clock] == sorted(s for _, s in clock)
    assert _history(client, run_id, "eval_train_samples") == [(step, step * 16.0) for step in steps]
    assert (metrics["steps_to_target"], metrics["samples_to_target"]) == (steps[-1], steps[-1] * 16)
    assert metrics["time_to_target_seconds"] == pytest.approx(clock[-1][1])
    assert 0 < metrics["time_to_target_train_seconds"] < metrics["time_to_target_seconds"]
    assert metrics["target_best_value"] == losses[-1][1] and metrics["eval_loss"] == losses[-1][1]
    assert (metrics["eval_samples_interval"], metrics["evaluations"]) == (160, len(steps))
    assert metrics["train_measured_steps"] == steps[-1] - 1  # what ran, not what was planned
    said = f"target eval_loss<=2.6: reached at step {steps[-1]} ({steps[-1] * 16} samples) in "
    assert said in done.stdout and said in tags["mlflow.note.content"]  # the console and the run's description

    # every evaluated checkpoint is a model of the run at its step with that evaluation's loss; none is copied
    mlflow.set_tracking_uri(sqlite_uri)
    ranked = mlflow.search_logged_models(experiment_ids=[run.info.experiment_id], output_format="list",
                                         filter_string="model_type = 'checkpoint'",
                                         order_by=[{"field_name": "metrics.eval_loss", "ascending": True}])
    assert sorted(int(m.tags["checkpoint.step"]) for m in ranked) == steps
    on_models = [next(x.value for x in m.metrics if x.key == "eval_loss") for m in ranked]
    assert on_models == sorted(loss for _, loss in losses)
    assert all(m.source_run_id == run_id and m.tags["checkpoint.uri"].startswith("file://") for m in ranked)
    kept = {int(m.tags["checkpoint.step"]) for m in ranked if m.tags["checkpoint.kept"] == "true"}
    assert kept == {steps[-1], steps[-2]}  # Trainer's rotation (save_total_limit 2) keeps the latest two
    stubs = {m.name: [f.path.rsplit("/", 1)[-1] for f in mlflow.artifacts.list_artifacts(
        artifact_uri=m.artifact_location)] for m in ranked}
    assert set(map(tuple, stubs.values())) == {("MLmodel",)}, stubs  # a pointer, not the weights

    # register_as registers the best by the target's metric: here the last evaluation, the final model
    version = client.get_model_version("ttq", "1")
    assert version.tags["checkpoint.step"] == str(steps[-1]) and float(version.tags["eval_loss"]) == \
        pytest.approx(losses[-1][1], rel=1e-5)
    assert no_running_runs(sqlite_uri) == []
    mlflow.set_tracking_uri(None)


def test_an_unreachable_target_finishes_and_says_so(cache_dir, sqlite_uri):
    done = run_cli(["train", "--max-steps", "2", "--eval-steps", "1", "--target", "eval_loss <= 0",
                    "--per-device-train-batch-size", "8", "--dataloader-num-workers", "0",
                    "--throughput-warmup-steps", "1", "--log-model", "false", "--experiment-name", "never"])
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(sqlite_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("never").experiment_id])
    metrics, tags = run.data.metrics, run.data.tags
    assert run.info.status == "FINISHED" and (tags["target"], tags["target.reached"]) == ("eval_loss<=0.0", "false")
    assert metrics["target_best_value"] == min(v for _, v in _history(client, run.info.run_id, "eval_loss"))
    assert not {"time_to_target_seconds", "time_to_target_train_seconds", "samples_to_target",
                "steps_to_target"} & set(metrics)
    assert f"target eval_loss<=0.0: not reached (best {metrics['target_best_value']:.4g})" in done.stdout


@pytest.mark.parametrize(("target", "says"), [
    ("eval_recall_at_5=0.2", "one eval metric, one comparison, one value"),
    ("eval_accuracy>=0.2", "metrics: eval_loss, eval_recall_at_1, eval_recall_at_5"),
    ("eval_loss>=1.5", "eval_loss<=VALUE (lower is better)"),
    ("eval_recall_at_5>=20", "a value from 0 to 1"),
])
def test_a_bad_target_is_one_line_and_no_run(sqlite_uri, target, says):
    done = run_cli(["train", "--target", target, "--experiment-name", "bad"])
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and line.startswith(f"error: target: invalid value {target!r}; allowed: ")
    assert says in line
    assert MlflowClient(sqlite_uri).get_experiment_by_name("bad") is None
