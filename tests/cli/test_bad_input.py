"""Bad input through the real CLI: one line naming the field, exit 2, no run left RUNNING (nor FINISHED).

Every train field is tried (run_name takes any text; experiment_name is tried on a deleted experiment).
Before the run starts, stderr is exactly that one line; after it started, it holds exactly one `error:`
line (the libraries' own log lines may precede it) and the run that really existed ends FAILED.
"""

import pytest

from bridgetower_mlflow.data.sample import generate_sample_set

from tests.conftest import mlflow_run, no_running_runs, run_cli

FAST = ["--max-steps", "4", "--logging-steps", "2"]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _corrupt_dataset(tmp_path):
    folder = generate_sample_set(tmp_path / "corrupt", {"train": 12, "validation": 4, "test": 2})
    (folder / "train" / "00003.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
    return folder


def _saved_dataset(tmp_path, column: str, value):
    """The sample set saved with `column` holding `value` in every row (a column of the wrong type)."""
    import datasets

    folder = generate_sample_set(tmp_path / "typed", {"train": 12, "validation": 4, "test": 2})
    splits = datasets.load_dataset("imagefolder", data_dir=str(folder)).map(lambda row: {column: value})
    splits.save_to_disk(str(tmp_path / f"{column}-wrong-type"))
    return tmp_path / f"{column}-wrong-type"


CASES = [  # (CLI arguments, extra environment, what the one error line must say)
    (["--accel", "tpu"], {}, "accel: invalid value 'tpu'; allowed: cpu, cuda, a100, h100, h200, gaudi, gaudi2, gaudi3"),
    (["--accel", "gaudi2"], {}, "accel: gaudi2 requested but no Gaudi device is present"),
    # no GPU visible even on a machine that has one
    (["--accel", "h100"], {"CUDA_VISIBLE_DEVICES": ""}, "accel: h100 requested but no NVIDIA GPU is visible"),
    (["--model", "/no/such/checkpoint"], {"HF_HUB_OFFLINE": "1"}, "model: invalid value '/no/such/checkpoint'; allowed: tiny, base, large"),
    (["--dataset", "/no/such/folder"], {}, "dataset: invalid value '/no/such/folder'; allowed: sample, a Hub dataset id (owner/name) or an existing local folder (no such path here)"),
    (["--dataset", "nobody/no-such-dataset"], OFFLINE, "dataset: cannot load Hub dataset 'nobody/no-such-dataset'"),
    (["--dataset", "nobody/no-such-dataset", "--dataset-config", "nope"], OFFLINE, "(config 'nope')"),
    (["--image-column", "picture"], {}, "image_column: column 'picture' not in the dataset; allowed: image, "),
    (["--caption-column", "caption"], {}, "caption_column: column 'caption' not in the dataset; allowed: image, "),
    (["--per-device-train-batch-size", "0"], {}, "per_device_train_batch_size: invalid value '0'; allowed: a whole number >= 1"),
    (["--per-device-train-batch-size", "abc"], {}, "per_device_train_batch_size: invalid value 'abc'; allowed: a whole number"),
    (["--per-device-train-batch-size", "1000", "--max-steps", "-1"], {}, "per_device_train_batch_size: invalid value 1000; allowed: at most"),
    (["--per-device-eval-batch-size", "0"], {}, "per_device_eval_batch_size: invalid value '0'; allowed: a whole number >= 1"),
    (["--dataloader-num-workers", "-1"], {}, "dataloader_num_workers: invalid value '-1'; allowed: a whole number >= 0"),
    (["--device-decode", "maybe"], {}, "device_decode: invalid value 'maybe'; allowed: true or false"),
    (["--device-decode", "true"], {}, "device_decode: invalid value 'true'; not supported on cpu"),
    (["--mediapipe-dataloader", "maybe"], {}, "mediapipe_dataloader: invalid value 'maybe'; allowed: true or false"),
    (["--allow-loader-fallback", "maybe"], {}, "allow_loader_fallback: invalid value 'maybe'; allowed: true or false"),
    (["--distribution-strategy", "zero3"], {}, "distribution_strategy: invalid value 'zero3'; allowed: ddp, fast_ddp"),
    (["--distribution-strategy", "fast_ddp"], {}, "distribution_strategy: invalid value 'fast_ddp'; allowed on cpu: ddp"),
    (["--devices", "0"], {}, "devices: invalid value '0'; allowed: a whole number >= 1"),
    (["--max-steps", "-5"], {}, "max_steps: invalid value '-5'; allowed: a whole number >= 1, or -1"),
    (["--num-train-epochs", "0", "--max-steps", "-1"], {}, "num_train_epochs: invalid value '0'; allowed: a number > 0.0"),
    (["--learning-rate", "-0.1"], {}, "learning_rate: invalid value '-0.1'; allowed: a number > 0.0"),
    (["--learning-rate", "nan"], {}, "learning_rate: invalid value 'nan'; allowed: a finite number"),
    (["--throughput-warmup-steps", "10"], {}, "throughput_warmup_steps: invalid value 10; allowed: fewer than the run's 4"),
    (["--logging-steps", "0"], {}, "logging_steps: invalid value '0'; allowed: a whole number >= 1"),
    (["--profile-steps", "5-2"], {}, "profile_steps: invalid value '5-2'; allowed: A-B, the first and last global step to profile (1 <= A <= B)"),
    (["--profile-steps", "x"], {}, "profile_steps: invalid value 'x'; allowed: A-B"),
    (["--max-steps", "8", "--profile-steps", "6-9"], {}, "profile_steps: invalid value '6-9'; allowed: steps within max_steps (8)"),
    (["--profile-steps", "3-4"], {}, "profile_steps: invalid value '3-4'; allowed: steps after the 3 warmup steps"),
    (["--seed", "-1"], {}, "seed: invalid value '-1'; allowed: a whole number >= 0"),
    (["--precision", "fp8"], {}, "precision: invalid value 'fp8'; allowed: auto, fp32, bf16"),
    (["--max-seq-length", "4"], {}, "max_seq_length: invalid value '4'; allowed: a whole number >= 8"),
    (["--max-train-samples", "-1"], {}, "max_train_samples: invalid value '-1'; allowed: a whole number >= 0"),
    (["--max-eval-samples", "x"], {}, "max_eval_samples: invalid value 'x'; allowed: a whole number"),
    (["--save-steps", "-1"], {}, "save_steps: invalid value '-1'; allowed: a whole number >= 0"),
    (["--register-as", "team/model"], {}, "register_as: invalid value 'team/model'"),
    (["--log-model", "perhaps"], {}, "log_model: invalid value 'perhaps'; allowed: true or false"),
    (["--log-model", "false", "--register-as", "bt"], {}, "log_model: invalid value 'false'; allowed: true when register_as is set"),
    (["--resume", "true"], {}, "resume: invalid value 'true'; allowed only after a run in output_dir"),
    (["--checkpoint-upload", "sometimes"], {}, "checkpoint_upload: invalid value 'sometimes'; allowed: true or false"),
    (["--run-id", "0123456789abcdef0123456789abcdef"], {}, "run_id: invalid value '0123456789abcdef0123456789abcdef'; allowed only with resume true"),
    (["--output-dir", "/dev/null/outputs"], {}, "output_dir: cannot write into '/dev/null/outputs' (Not a directory"),
    (["--hf-args", "--no_such_flag 1"], {}, "hf_args: invalid value '--no_such_flag 1'; allowed: TrainingArguments flags"),
    (["--hf-args", "--warmup_steps abc"], {}, "hf_args: invalid value '--warmup_steps abc'"),
    (["--hf-args", "--unclosed 'quote"], {}, "hf_args: invalid value"),
    (["--hf-args", "--hub_token hf_abcdefghijklmnopqrstuvwxyz"], {}, "hf_args: invalid value '--hub_token ***'; allowed: flags without secrets"),
    ([], {"MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "2s"}, "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL: invalid value '2s'; allowed: a number of seconds above 0 (unset: 2)"),
    ([], {"MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "maybe"}, "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING: invalid value 'maybe'; allowed: true or false"),
    ([], {"BRIDGETOWER_FLUSH_TIMEOUT": "-1"}, "BRIDGETOWER_FLUSH_TIMEOUT: invalid value '-1'; allowed: seconds, a number above 0 (unset: 120)"),
    ([], {"BRIDGETOWER_PROGRESS_SECONDS": "soon"}, "BRIDGETOWER_PROGRESS_SECONDS: invalid value 'soon'; allowed: seconds, a number >= 0"),
    ([], {"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}, "tracking: server http://127.0.0.1:9 unreachable"),
    ([], {"MLFLOW_TRACKING_URI": "http://bob:hunter2@127.0.0.1:9"}, "tracking: server http://127.0.0.1:9 unreachable"),  # the password moved out of the URI first
    # said before the model and data load (a bad column is found only then): seconds, not minutes of a large model
    (["--image-column", "picture"], {"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}, "tracking: server http://127.0.0.1:9 unreachable"),
    (["--resume", "true", "--image-column", "picture"], {}, "resume: invalid value 'true'; allowed only after a run in output_dir"),
    (["--throughput-warmup-steps", "4", "--image-column", "picture"], {}, "throughput_warmup_steps: invalid value 4; allowed: fewer than the run's 4"),
]


def _case_id(case):
    args, env, _ = case.values if hasattr(case, "values") else case
    return " ".join(args) or next(iter(env.values()))


def _statuses(uri: str) -> list[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return [r.info.status for r in client.search_runs(ids)] if ids else []


def _check_refused(done, expected: str, uri: str) -> str:
    """Exit 2, stderr exactly one `error:` line holding `expected`, nothing on stdout, no run but FAILED ones."""
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], done.stderr[-2000:]
    assert done.stdout == "" and "hunter2" not in done.stderr
    if uri.startswith("sqlite"):
        assert set(_statuses(uri)) <= {"FAILED"} and no_running_runs(uri) == []
    return lines[0]


@pytest.mark.parametrize("args,env,expected", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_input_fails_with_one_line(cache_dir, sqlite_uri, args, env, expected):
    fast = [] if "--max-steps" in args else FAST
    done = run_cli(["train", *fast, *args], env_extra=env)
    _record(args, env, _check_refused(done, expected, env.get("MLFLOW_TRACKING_URI", sqlite_uri)))


def test_deleted_experiment_is_one_line(cache_dir, sqlite_uri):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sqlite_uri)
    client.delete_experiment(client.create_experiment("gone"))
    done = run_cli(["train", *FAST, "--experiment-name", "gone"])
    _check_refused(done, "tracking: cannot start the run at sqlite:", sqlite_uri)
    assert "Cannot set a deleted experiment 'gone'" in done.stderr


def test_caption_column_of_numbers_is_one_line(cache_dir, sqlite_uri, tmp_path):
    done = run_cli(["train", *FAST, "--dataset", str(_saved_dataset(tmp_path, "image_description", 7))])
    _check_refused(done, "caption_column: ", sqlite_uri)


def _record(args, env, line):
    """The table of bad inputs and their messages, kept as a test artifact for review."""
    from tests.conftest import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    with open(ARTIFACTS / "bad-inputs.md", "a", encoding="utf-8") as table:
        shown = " ".join(args) + (" " + " ".join(f"{k}={v}" for k, v in env.items()) if env else "")
        table.write(f"| `{shown}` | `{line}` |\n")


def _failed_after_start(done, uri: str, expected: str):
    """Exactly one `error:` line holding `expected`, and the one run (it really started) is FAILED."""
    from mlflow.tracking import MlflowClient

    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and expected in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    (run,) = MlflowClient(uri).search_runs(["0"])
    assert run.info.status == "FAILED" and run.data.params  # it had started: its params were logged
    return errors[0], run


@pytest.mark.slow
def test_corrupt_jpeg_names_the_file_and_fails_the_run(cache_dir, sqlite_uri, tmp_path):
    folder = _corrupt_dataset(tmp_path)
    done = run_cli(["train", "--dataset", str(folder), "--per-device-train-batch-size", "4", "--log-model", "false",
                    "--dataloader-num-workers", "0", "--throughput-warmup-steps", "1", "--max-steps", "3"])
    line, run = _failed_after_start(done, sqlite_uri, "error: dataset: image ")
    assert "00003.jpg" in line and "cannot decode" in line and "00003.jpg" in run.data.tags["error"]


@pytest.mark.slow
def test_image_column_of_text_fails_the_run_with_one_line(cache_dir, sqlite_uri, tmp_path):
    folder = _saved_dataset(tmp_path, "picture", "not an image")
    done = run_cli(["train", *FAST, "--dataset", str(folder), "--image-column", "picture", "--log-model", "false",
                    "--per-device-train-batch-size", "4", "--dataloader-num-workers", "0"])
    line, run = _failed_after_start(done, sqlite_uri, "error: dataset: image not an image: cannot decode")
    assert run.data.tags["error"] == line.removeprefix("error: ")


@pytest.mark.slow
def test_unwritable_checkpoint_folder_fails_the_run_with_one_line(cache_dir, sqlite_uri, tmp_path):
    from mlflow.tracking import MlflowClient

    run_id = MlflowClient(sqlite_uri).create_run("0").info.run_id  # as mlflow run does: the folder is known
    (tmp_path / "out" / run_id).mkdir(parents=True)
    (tmp_path / "out" / run_id / "checkpoint-2").write_text("a file where the first checkpoint goes")
    done = run_cli(["train", *FAST, "--save-steps", "2", "--output-dir", str(tmp_path / "out"), "--log-model",
                    "false", "--per-device-train-batch-size", "4", "--dataloader-num-workers", "0"],
                   env_extra={"MLFLOW_RUN_ID": run_id})
    line, _ = _failed_after_start(done, sqlite_uri, "error: output_dir: cannot write into")
    assert "checkpoint-2" in line


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


def test_a_resume_of_a_run_the_store_does_not_have_is_one_line(cache_dir, sqlite_uri):
    from mlflow.tracking import MlflowClient

    MlflowClient(sqlite_uri).create_experiment("exists")  # a store that is there (a fresh one logs its creation)
    done = run_cli(["train", *FAST, "--resume", "true", "--run-id", "0" * 32])
    _check_refused(done, f"run_id: invalid value '{'0' * 32}'; allowed: the id of a run in this tracking store (it "
                         f"has no run {'0' * 32})", sqlite_uri)


@pytest.mark.slow
def test_a_profile_window_past_an_epoch_run_fails_the_run_with_one_line(cache_dir, sqlite_uri):
    """An epoch run learns its step count when training starts: the window is checked there."""
    done = run_cli(["train", "--max-steps", "-1", "--num-train-epochs", "1", "--max-train-samples", "16",
                    "--per-device-train-batch-size", "4", "--dataloader-num-workers", "0", "--log-model", "false",
                    "--profile-steps", "5-9"])
    line, run = _failed_after_start(done, sqlite_uri, "error: profile_steps: invalid value '5-9'; allowed: steps "
                                                      "within the run's 4")
    assert run.data.tags["error"] == line.removeprefix("error: ")
