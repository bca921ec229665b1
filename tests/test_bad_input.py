"""Bad input through the real CLI: one line naming the field, exit 2, no run left RUNNING."""

import shutil

import pytest

from bridgetower_mlflow.data.sample import generate_sample_set
from conftest import mlflow_run, no_running_runs, run_cli

FAST = ["--max-steps", "4", "--logging-steps", "2"]


def _corrupt_dataset(tmp_path):
    folder = generate_sample_set(tmp_path / "corrupt", {"train": 12, "validation": 4, "test": 2})
    (folder / "train" / "00003.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
    return folder


CASES = [
    (["--accel", "tpu"], "accel: invalid value 'tpu'; allowed: cpu, cuda, a100, h100, h200, gaudi, gaudi2, gaudi3"),
    (["--accel", "gaudi2"], "gaudi2"),
    (["--dataloader-num-workers", "-1"], "dataloader_num_workers: invalid value '-1'; allowed: a whole number >= 0"),
    (["--per-device-train-batch-size", "0"], "per_device_train_batch_size: invalid value '0'"),
    (["--dataset", "/no/such/folder"], "dataset: folder '/no/such/folder' does not exist"),
    (["--device-decode", "true"], "device_decode: invalid value 'true'; not supported on cpu"),
    (["--throughput-warmup-steps", "10"], "throughput_warmup_steps: invalid value 10; allowed: fewer than the run's 4"),
    (["--hf-args", "--no_such_flag 1"], "hf_args: invalid value"),
]


@pytest.mark.parametrize("args,expected", CASES, ids=[c[0][0] + "=" + c[0][1] for c in CASES])
def test_bad_input_fails_fast_with_one_line(cache_dir, sqlite_uri, args, expected):
    done = run_cli(["train", *FAST, *args])
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and expected in last, last
    assert "Traceback" not in done.stderr
    assert no_running_runs(sqlite_uri) == []


@pytest.mark.slow
def test_corrupt_jpeg_names_the_file_and_fails_the_run(cache_dir, sqlite_uri, tmp_path):
    folder = _corrupt_dataset(tmp_path)
    done = run_cli(["train", "--dataset", str(folder), "--per-device-train-batch-size", "4",
                    "--dataloader-num-workers", "0", "--throughput-warmup-steps", "1", "--max-steps", "3"])
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: dataset: image ") and "00003.jpg" in last and "cannot decode" in last
    from mlflow.tracking import MlflowClient

    runs = MlflowClient(sqlite_uri).search_runs(["0"])
    assert [r.info.status for r in runs] == ["FAILED"] and "00003.jpg" in runs[0].data.tags["error"]


@pytest.mark.slow
def test_project_run_of_absent_accelerator_is_marked_failed(cache_dir, sqlite_uri):
    done = mlflow_run({"accel": "gaudi2", "max_steps": 4}, "bad")
    assert done.returncode != 0
    assert any(line.startswith("error: ") and "gaudi2" in line for line in done.stderr.splitlines())
    assert no_running_runs(sqlite_uri) == []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sqlite_uri)
    runs = client.search_runs([client.get_experiment_by_name("bad").experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]
