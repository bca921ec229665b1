"""Failures that used to end in a traceback, through the real CLI: one `error:` line naming the field or file,
exit 2, and (when the run had started) the run FAILED with that line as its reason."""

from __future__ import annotations

import json
import shutil

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.contract import MODEL_URI_TAG
from bridgetower_mlflow.data.sample import generate_sample_set

from tests.conftest import MlflowServer, no_running_runs, run_cli

QUICK = ["--max-steps", "3", "--logging-steps", "1", "--throughput-warmup-steps", "1", "--dataloader-num-workers", "0",
         "--per-device-train-batch-size", "4"]


def _one_line(done, expected: str) -> str:
    """Exit 2, stderr exactly one `error:` line holding `expected`, nothing on stdout."""
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], done.stderr[-3000:]
    assert done.stdout == ""
    return lines[0]


def _failed_run(done, uri: str, expected: str):
    """Exactly one `error:` line holding `expected`, no traceback, and the one run FAILED with it as its reason."""
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and expected in errors[0], done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (run,) = MlflowClient(uri).search_runs(["0"])
    assert run.info.status == "FAILED" and run.data.tags["error"] == errors[0].removeprefix("error: ")
    assert no_running_runs(uri) == []
    return errors[0], run


def _runs(uri: str) -> list:
    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def test_a_one_image_dataset_is_one_line(cache_dir, sqlite_uri, tmp_path):
    sample = generate_sample_set(tmp_path / "full", {"train": 2, "validation": 2, "test": 1})
    folder = tmp_path / "one-image" / "train"
    folder.mkdir(parents=True)
    shutil.copy(sample / "train" / "00000.jpg", folder)
    (folder / "metadata.jsonl").write_text((sample / "train" / "metadata.jsonl").read_text().splitlines()[0] + "\n")
    done = run_cli(["train", *QUICK, "--per-device-train-batch-size", "1", "--dataset", str(folder.parent)])
    line = _one_line(done, "error: dataset: ")
    assert "'train' split has 1 row" in line and "allowed: " in line
    assert _runs(sqlite_uri) == []


def test_an_empty_dataset_folder_is_one_line(cache_dir, sqlite_uri, tmp_path):
    (tmp_path / "nothing").mkdir()
    done = run_cli(["train", *QUICK, "--dataset", str(tmp_path / "nothing")])
    line = _one_line(done, f"error: dataset: cannot load folder '{tmp_path / 'nothing'}'")
    assert "allowed: " in line


def test_a_corrupt_jpeg_in_the_validation_split_names_the_file_and_fails_the_run(cache_dir, sqlite_uri, tmp_path):
    folder = generate_sample_set(tmp_path / "bad-validation", {"train": 8, "validation": 4, "test": 1})
    (folder / "validation" / "00002.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
    done = run_cli(["train", *QUICK, "--dataset", str(folder), "--log-model", "false"])
    line, run = _failed_run(done, sqlite_uri, "error: dataset: image ")
    assert "validation/00002.jpg" in line and "cannot decode" in line


def test_a_model_upload_that_fails_after_retries_is_one_line_and_fails_the_run(cache_dir, tmp_path, monkeypatch):
    """A real server whose artifact store takes run files but not models (its `0/models` is a file)."""
    artifacts = tmp_path / "server-artifacts"
    (artifacts / "0").mkdir(parents=True)
    (artifacts / "0" / "models").write_text("a file where the models folder goes")
    server = MlflowServer(f"sqlite:///{tmp_path / 'server.db'}", artifacts).start()
    try:
        done = run_cli(["train", *QUICK], env_extra={"MLFLOW_TRACKING_URI": server.url,
                                                     "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                                                     "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0"})
        line, run = _failed_run(done, server.url, f"error: tracking: cannot log the model at {server.url}")
        assert "models/m-" in line  # the artifact that could not be uploaded
        assert MODEL_URI_TAG not in run.data.tags  # no model was logged
    finally:
        server.stop()


def test_a_sample_set_that_cannot_be_written_is_one_line(cache_dir, sqlite_uri, tmp_path):
    """dataset=sample makes the set in the cache folder: where a file stands in its way, train says so."""
    cache = tmp_path / "cache"  # the preset's tokenizer is made there; the sample set cannot be
    cache.mkdir()
    (cache / "sample-v2").write_text("a file where the sample set goes")
    done = run_cli(["train", *QUICK], env_extra={"BRIDGETOWER_MLFLOW_CACHE": str(cache)})
    line = _one_line(done, f"error: dataset: cannot write the sample set into '{cache / 'sample-v2'}'")
    assert "BRIDGETOWER_MLFLOW_CACHE" in line
    assert _runs(sqlite_uri) == []


def test_a_cache_folder_under_a_file_is_one_line(cache_dir, sqlite_uri, tmp_path):
    """The preset's tokenizer is made in the cache folder first: a file in its place is one `model:` line."""
    (tmp_path / "a-file").write_text("not a folder")
    cache = tmp_path / "a-file" / "cache"
    done = run_cli(["train", *QUICK], env_extra={"BRIDGETOWER_MLFLOW_CACHE": str(cache)})
    line = _one_line(done, "error: model: cannot write the preset tokenizer into")
    assert "BRIDGETOWER_MLFLOW_CACHE" in line and str(tmp_path / "a-file") in line
    assert _runs(sqlite_uri) == []


def test_sample_data_errors_are_one_line(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    keep = tmp_path / "my-work"
    keep.mkdir()
    (keep / "notes.txt").write_text("precious")
    cases = [("/dev/null/sample", "error: output: cannot write the sample set into '/dev/null/sample'"),
             (str(tmp_path / "a-file"), f"error: output: cannot write the sample set into '{tmp_path / 'a-file'}'"),
             (str(keep), f"error: output: cannot write the sample set into '{keep}' (")]
    for output, expected in cases:
        done = run_cli(["sample-data", "--output", output, "--train-size", "2", "--validation-size", "2",
                        "--test-size", "1"])
        line = _one_line(done, expected)
        assert "allowed: " in line
    assert (keep / "notes.txt").read_text() == "precious"  # a folder of other files is never replaced
    assert (tmp_path / "a-file").read_text() == "not a folder"


def test_sample_data_remakes_its_own_set(tmp_path):
    folder = tmp_path / "sample"
    for size in (2, 3):
        done = run_cli(["sample-data", "--output", str(folder), "--train-size", str(size), "--validation-size", "2",
                        "--test-size", "1"])
        assert done.returncode == 0, done.stderr
        assert json.loads((folder / "COMPLETE").read_text())["sizes"]["train"] == size


@pytest.mark.parametrize("present", [False, True])
def test_sample_data_takes_an_empty_or_absent_folder(tmp_path, present):
    folder = tmp_path / "new"
    if present:
        folder.mkdir()
    done = run_cli(["sample-data", "--output", str(folder), "--train-size", "2", "--validation-size", "2",
                    "--test-size", "1"])
    assert done.returncode == 0, done.stderr
    assert (folder / "COMPLETE").exists()
