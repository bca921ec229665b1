"""Bad input through the real CLI: one line naming the field, exit 2, no run left RUNNING."""


import pytest

from bridgetower_mlflow.data.sample import generate_sample_set

from conftest import mlflow_run, no_running_runs, run_cli

FAST = ["--max-steps", "4", "--logging-steps", "2"]


def _corrupt_dataset(tmp_path):
    folder = generate_sample_set(tmp_path / "corrupt", {"train": 12, "validation": 4, "test": 2})
    (folder / "train" / "00003.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
    return folder


CASES = [  # (CLI arguments, extra environment, what the one error line must say)
    (["--accel", "tpu"], {}, "accel: invalid value 'tpu'; allowed: cpu, cuda, a100, h100, h200, gaudi, gaudi2, gaudi3"),
    (["--accel", "gaudi2"], {}, "accel: gaudi2 requested but no Gaudi device is present"),
    (["--accel", "h100"], {}, "accel: h100 requested but no NVIDIA GPU is visible"),
    (["--dataloader-num-workers", "-1"], {}, "dataloader_num_workers: invalid value '-1'; allowed: a whole number >= 0"),
    (["--per-device-train-batch-size", "0"], {}, "per_device_train_batch_size: invalid value '0'; allowed: a whole number >= 1"),
    (["--per-device-train-batch-size", "abc"], {}, "per_device_train_batch_size: invalid value 'abc'; allowed: a whole number"),
    (["--per-device-train-batch-size", "1000"], {"max": ""}, "per_device_train_batch_size: invalid value 1000; allowed: at most"),
    (["--learning-rate", "-0.1"], {}, "learning_rate: invalid value '-0.1'; allowed: a number > 0.0"),
    (["--learning-rate", "nan"], {}, "learning_rate: invalid value 'nan'; allowed: a finite number"),
    (["--num-train-epochs", "0"], {"max": ""}, "num_train_epochs: invalid value '0'; allowed: a number > 0.0"),
    (["--max-steps", "-5"], {}, "max_steps: invalid value '-5'; allowed: a whole number >= 1, or -1"),
    (["--logging-steps", "0"], {}, "logging_steps: invalid value '0'; allowed: a whole number >= 1"),
    (["--devices", "0"], {}, "devices: invalid value '0'; allowed: a whole number >= 1"),
    (["--precision", "fp8"], {}, "precision: invalid value 'fp8'; allowed: auto, fp32, bf16"),
    (["--distribution-strategy", "zero3"], {}, "distribution_strategy: invalid value 'zero3'; allowed: ddp, fast_ddp"),
    (["--distribution-strategy", "fast_ddp"], {}, "distribution_strategy: invalid value 'fast_ddp'; allowed on cpu: ddp"),
    (["--device-decode", "maybe"], {}, "device_decode: invalid value 'maybe'; allowed: true or false"),
    (["--device-decode", "true"], {}, "device_decode: invalid value 'true'; not supported on cpu"),
    (["--throughput-warmup-steps", "10"], {}, "throughput_warmup_steps: invalid value 10; allowed: fewer than the run's 4"),
    (["--dataset", "/no/such/folder"], {}, "dataset: folder '/no/such/folder' does not exist"),
    (["--dataset", "nobody/no-such-dataset"], {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
     "dataset: cannot load Hub dataset 'nobody/no-such-dataset'"),
    (["--caption-column", "caption"], {}, "caption_column: column 'caption' not in the dataset; allowed: image, "),
    (["--model", "/no/such/checkpoint"], {"HF_HUB_OFFLINE": "1"}, "model: invalid value '/no/such/checkpoint'; allowed: tiny, base, large"),
    (["--hf-args", "--no_such_flag 1"], {}, "hf_args: invalid value '--no_such_flag 1'; allowed: TrainingArguments flags"),
    (["--hf-args", "--warmup_steps abc"], {}, "hf_args: invalid value '--warmup_steps abc'"),
    (["--hf-args", "--unclosed 'quote"], {}, "hf_args: invalid value"),
    (["--register-as", "team/model"], {}, "register_as: invalid value 'team/model'"),
    (["--resume", "true"], {}, "resume: invalid value 'true'; allowed only after a run in output_dir"),
    ([], {"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}, "tracking: server http://127.0.0.1:9 unreachable"),
    ([], {"MLFLOW_TRACKING_URI": "http://bob:hunter2@127.0.0.1:9"}, "tracking: server http://***@127.0.0.1:9 unreachable"),
]


def _case_id(case):
    args, env, _ = case
    return " ".join(args) or next(iter(env.values()))


@pytest.mark.parametrize("args,env,expected", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_input_fails_with_one_line(cache_dir, sqlite_uri, args, env, expected):
    env = {k: v for k, v in env.items() if k != "max"}
    fast = [] if "--max-steps" in args or "--num-train-epochs" in args else FAST
    if "--per-device-train-batch-size" in args and "1000" in args:
        fast = []
    done = run_cli(["train", *fast, *args], env_extra=env)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and expected in last, last
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr + done.stdout
    uri = env.get("MLFLOW_TRACKING_URI", sqlite_uri)
    if uri.startswith("sqlite"):
        assert no_running_runs(uri) == []
    _record(args, env, last)


def _record(args, env, line):
    """The table of bad inputs and their messages, kept as a test artifact for review."""
    from conftest import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    with open(ARTIFACTS / "bad-inputs.md", "a", encoding="utf-8") as table:
        shown = " ".join(args) + (" " + " ".join(f"{k}={v}" for k, v in env.items()) if env else "")
        table.write(f"| `{shown}` | `{line}` |\n")


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
