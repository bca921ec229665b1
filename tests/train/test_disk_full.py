"""A full disk, as a user meets it: a real `train` into a real small filesystem (a tmpfs of a few MB; the tiny
preset's checkpoint takes 6.3 MB: model 2.06 MB, optimizer 4.2 MB). One line, exit status 1, the run FAILED with
that line as its `error` tag and every step up to the failure in the store; no torn checkpoint in the common case;
room made, `--resume true` finishes the run with every step once. A torn checkpoint (a kill, another process
filling the disk) is removed by the next start; a refused resume leaves the run exactly as it was."""

from __future__ import annotations

import shutil

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import no_running_runs, run_cli
from tests.support.small_disk import fill, grow, small_disks

pytestmark = pytest.mark.slow
TRAIN = ["train", "--logging-steps", "1", "--per-device-train-batch-size", "8", "--dataloader-num-workers", "0",
         "--log-model", "false"]


@pytest.fixture
def disks(tmp_path):
    with small_disks(tmp_path) as make:
        yield make


def _error_line(done) -> str:
    """The command's one line (and nothing like a traceback around it)."""
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0].removeprefix("error: ")


def _only_run(uri):
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return client, run


def _steps(client, run_id, key="loss"):
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def _checkpoints(folder):
    return sorted(p.name for p in folder.glob("*/checkpoint-*"))


def test_a_folder_full_at_start_is_one_line_and_starts_no_run(cache_dir, sqlite_uri, disks):
    out = disks(3, "out")
    fill(out)
    done = run_cli([*TRAIN, "--max-steps", "2", "--output-dir", str(out)])
    assert done.returncode == 1
    assert _error_line(done) == (f"output_dir: no space left on device for a first file in '{out}' (0.0 MB free); "
                                 "free space there or choose another output_dir")
    client = MlflowClient(sqlite_uri)
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def test_a_first_checkpoint_that_cannot_fit_is_refused_before_a_byte_is_written(cache_dir, sqlite_uri, disks):
    out = disks(3, "out")
    done = run_cli([*TRAIN, "--max-steps", "4", "--save-steps", "2", "--output-dir", str(out)])
    assert done.returncode == 1
    line = _error_line(done)
    client, run = _only_run(sqlite_uri)
    run_folder = out / run.info.run_id
    assert line.startswith(f"output_dir: not enough free space for checkpoint-2 in '{run_folder}' (needs ")
    assert "MB: the model's parameters and optimizer state; 3." in line and " MB free); free space there" in line
    assert line.endswith("it left no complete checkpoint to resume from (save_steps=0, or none saved whole yet): "
                         "train it again")
    assert run.info.status == "FAILED" and run.data.tags["error"] == line
    assert _steps(client, run.info.run_id) == [1, 2]  # every step up to the failure
    assert _checkpoints(out) == []  # nothing torn

    # a checkpoint cut anyway (a kill, another process filling the disk): the only one there is torn
    (run_folder / "checkpoint-2").mkdir(parents=True)
    (run_folder / "checkpoint-2" / "model.safetensors").write_bytes(b"\0" * 1000)
    again = run_cli([*TRAIN, "--max-steps", "4", "--save-steps", "2", "--output-dir", str(out), "--resume", "true"])
    assert again.returncode == 2
    assert _error_line(again) == (f"resume: invalid value 'true'; allowed only with a complete checkpoint; the "
                                  f"checkpoints found in '{run_folder}' were incomplete (checkpoint-2: saves cut "
                                  f"short); the tracking server holds none under checkpoints/ either "
                                  f"(checkpoint_upload true uploads them)")
    assert f"removing {run_folder / 'checkpoint-2'}: an incomplete checkpoint" in again.stderr
    after = client.get_run(run.info.run_id)
    assert (after.info.status, after.data.tags, after.info.end_time) == \
        (run.info.status, run.data.tags, run.info.end_time)  # a refused resume changes nothing: no `resumed` tag
    assert _checkpoints(out) == [] and no_running_runs(sqlite_uri) == []


def test_8mb_the_second_checkpoint_does_not_fit_then_room_is_made_and_the_resume_finishes(cache_dir, sqlite_uri,
                                                                                          disks):
    out = disks(8, "out")
    args = [*TRAIN, "--max-steps", "6", "--save-steps", "2", "--output-dir", str(out)]
    done = run_cli(args)
    assert done.returncode == 1
    line = _error_line(done)
    client, run = _only_run(sqlite_uri)
    run_folder = out / run.info.run_id
    assert line.startswith(f"output_dir: not enough free space for checkpoint-4 in '{run_folder}' (needs 6.3 MB: "
                           "the size of checkpoint-2; ")
    assert "then resume with: bridgetower-mlflow train " in line and line.endswith("--resume true")
    assert run.info.status == "FAILED" and run.data.tags["error"] == line
    assert _steps(client, run.info.run_id) == [1, 2, 3, 4]
    assert _checkpoints(out) == ["checkpoint-2"]

    grow(out, 24)  # room made
    torn = run_folder / "checkpoint-4"  # and what a kill during the next save would have left
    torn.mkdir()
    shutil.copy(run_folder / "checkpoint-2" / "model.safetensors", torn)
    resumed = run_cli([*args, "--resume", "true"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"removing {torn}: an incomplete checkpoint" in resumed.stderr
    finished = client.get_run(run.info.run_id)
    assert finished.info.status == "FINISHED" and "error" not in finished.data.tags
    assert finished.data.tags["resumed.from_step"] == "2"
    assert _steps(client, run.info.run_id) == [1, 2, 3, 4, 5, 6]  # every step once
    assert _checkpoints(out) == ["checkpoint-4", "checkpoint-6"]  # save_total_limit 2 (train's default)


def test_the_saved_model_that_cannot_fit_is_one_line_with_the_final_metrics_kept(cache_dir, sqlite_uri, disks):
    out = disks(2, "out")  # the model takes 2.06 MB
    done = run_cli([*TRAIN, "--max-steps", "2", "--throughput-warmup-steps", "1", "--log-model", "true",
                    "--output-dir", str(out)])
    assert done.returncode == 1
    line = _error_line(done)
    client, run = _only_run(sqlite_uri)
    assert line.startswith(f"output_dir: not enough free space for final-model in '{out / run.info.run_id}' (needs "
                           "2.3 MB: the model's parameters; ")
    assert line.endswith("free space there or choose another output_dir")
    assert run.info.status == "FAILED" and run.data.tags["error"] == line
    assert {"train_runtime", "train_loss", "eval_loss"} <= set(run.data.metrics)
    assert not (out / run.info.run_id / "final-model").exists()


def test_the_logged_model_on_a_full_file_store_is_one_line(cache_dir, sqlite_uri, disks, tmp_path):
    artifacts = disks(1, "artifacts")  # the file store's artifact folder: the model's copy does not fit
    MlflowClient(sqlite_uri).create_experiment("small-store", artifact_location=str(artifacts))
    done = run_cli([*TRAIN, "--max-steps", "2", "--throughput-warmup-steps", "1", "--log-model", "true",
                    "--experiment-name", "small-store", "--output-dir", str(tmp_path / "out")])
    assert done.returncode == 1
    line = _error_line(done)
    _, run = _only_run(sqlite_uri)
    assert line.startswith(f"tracking: no space left on device for the logged model in '{artifacts}/"), line
    assert line.endswith(" MB free); free space there")
    assert run.info.status == "FAILED" and run.data.tags["error"] == line
