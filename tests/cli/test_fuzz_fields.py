"""Every input field fuzzed: each train option (config.SCHEMA's fields and their aliases, so a new field is fuzzed
too) and each option of sweep, compare and promote (their click params) gets the hostile values below.

A refused value: exit 2, exactly one stderr line `error: <field>: ...` naming the field, no traceback, nothing
written to the store (its bytes unchanged), no run left RUNNING; through `mlflow run` the run MLflow made first
ends FAILED with that line. A value that passes a check is one the code behind it takes: train's are combined into as
few real short runs as possible (tiny preset, a few steps) that must finish; only what needs the loaded data or the
accelerator's TrainingArguments class (ALLOWED_LATER) may be refused then, in the same one line, before any run.
In-process (click's CliRunner): a refusal never imports torch, so the refusals take seconds.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.cli import main
from bridgetower_mlflow.compare.command import compare_command
from bridgetower_mlflow.config import build_train_config
from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.promote.command import promote_command
from bridgetower_mlflow.sweep.command import sweep_command
from bridgetower_mlflow.tracking.params import prepare_params
from bridgetower_mlflow.train.command import train_command

from tests.conftest import no_running_runs

HOSTILE = {"empty": "", "whitespace": " \t ", "huge": "99999999999999999999", "negative": "-1",
           "huge negative": "-99999999999999999999", "1e99": "1e99", "nan": "nan", "inf": "inf",
           "10,000 characters": "x" * 10_000, "unicode": "ünïcødé ✓ 漢字 \u202e", "flag-looking": "--x",
           "missing path": "{tmp}/no/such/path"}
# refused only once what they name is loaded: a dataset's columns, the accelerator's TrainingArguments flags
ALLOWED_LATER = {"image_column", "caption_column", "hf_args"}
# each command's least arguments, so one option at a time is what is judged (a sweep of one cell, its cells `true`:
# the sweep's own checks and bookkeeping are what is fuzzed here; train's are fuzzed above)
BASE = {"train": [], "sweep": ["--workers", "0", "--repeats", "1", "--device-decode", "false"],
        "compare": ["--no-log"], "promote": ["--model-name", "fuzz-model"]}
FAST_RUN = {"max_steps": "3", "logging_steps": "1", "throughput_warmup_steps": "1", "per_device_train_batch_size": "4",
            "dataloader_num_workers": "0", "log_model": "false", "max_seq_length": "16", "max_train_samples": "16",
            "max_eval_samples": "8", "per_device_eval_batch_size": "4"}


def _options(command) -> list[str]:
    return [p.name for p in command.params if p.opts and not getattr(p, "is_flag", False) and not p.secondary_opts]


def _cases(command, tmp: Path) -> list[tuple[str, str, str]]:
    return [(name, label, value.format(tmp=tmp)) for name in _options(command) for label, value in HOSTILE.items()]


def _digest(folder: Path) -> str:
    """The store's bytes (its database and any journal beside it)."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("mlflow.db*")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-store")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    MlflowClient(uri).search_experiments()  # the tables exist: later bytes change only by what a command wrote
    return folder, uri


def _invoke(command: str, name: str, value: str, uri: str, env: dict | None = None):
    option = "--" + name.replace("_", "-")
    return CliRunner().invoke(main, [command, *BASE[command], f"{option}={value}"],
                              env={"MLFLOW_TRACKING_URI": uri, "MLFLOW_RUN_ID": None, **(env or {})})


def _refused_in_one_line(result, name: str) -> str:
    lines = result.stderr.splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {name}: "), \
        (name, result.exit_code, result.stderr[-600:], result.exception)
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    return lines[0]


def _train_refuses(name: str, value: str) -> bool:
    try:
        build_train_config(**{name: value})
    except ConfigError:
        return True
    return False


def test_every_train_value_its_check_refuses_is_one_line_and_writes_nothing(store, tmp_path):
    folder, uri = store
    before, refused = _digest(folder), 0
    for name, _label, value in _cases(train_command, tmp_path):
        if _train_refuses(name, value):
            _refused_in_one_line(_invoke("train", name, value, uri), name)
            refused += 1
    assert refused and _digest(folder) == before  # nothing reached the store
    print(f"train: {refused} of {len(_cases(train_command, tmp_path))} values refused, one line each")


def test_a_refusal_under_mlflow_run_fails_the_run_mlflow_made_first(store):
    _, uri = store
    run = MlflowClient(uri).create_run("0")  # as `mlflow run` does before it starts the entry point
    result = _invoke("train", "seed", "1e99", uri, env={"MLFLOW_RUN_ID": run.info.run_id})
    line = _refused_in_one_line(result, "seed")
    ended = MlflowClient(uri).get_run(run.info.run_id)
    assert ended.info.status == "FAILED" and ended.data.tags["error"] == line.removeprefix("error: ")


@pytest.mark.parametrize("command", [sweep_command, compare_command, promote_command], ids=lambda c: c.name)
def test_every_other_commands_option_refuses_in_one_line_or_takes_the_value(command, store, tmp_path, monkeypatch):
    """Each hostile value alone: refused (one line naming the option, nothing written) or taken, the command then
    ending without a traceback and no run RUNNING (a sweep's cell is `true`; compare and promote find nothing)."""
    folder, uri = store
    monkeypatch.setenv("BRIDGETOWER_TRAIN_CMD", "true")
    outcomes = {"refused": 0, "taken": 0}
    for name, label, value in _cases(command, tmp_path):
        os.chdir(tmp_path / _fresh(tmp_path, name, label))  # a folder a taken value writes stays its own
        before = _digest(folder)
        result = _invoke(command.name, name, value, uri)
        assert "Traceback" not in result.output and isinstance(result.exception, (SystemExit, type(None))), \
            (name, label, result.exception, result.output[-1500:])
        errors = result.stderr.splitlines()
        if result.exit_code == 2 and errors and errors[0].startswith(f"error: {name}: "):
            _refused_in_one_line(result, name)
            assert _digest(folder) == before, (name, label)
            outcomes["refused"] += 1
        else:
            assert len([line for line in errors if line.startswith("error: ")]) <= 1, (name, label, errors)
            outcomes["taken"] += 1
    assert no_running_runs(uri) == []
    print(f"{command.name}: {outcomes}")


def _fresh(tmp_path: Path, name: str, label: str) -> str:
    folder = f"{name}-{label.replace(' ', '-').replace(',', '')}"
    (tmp_path / folder).mkdir()
    return folder


def _run_args(fields: dict[str, str]) -> dict[str, str]:
    """The fuzzed values on a short run: a model is logged only where one is to be registered."""
    registers = bool(fields.get("register_as", "").strip())
    return {**FAST_RUN, "log_model": "true" if registers else "false", **fields}


def _fits(fields: dict[str, str]) -> bool:
    """The run would be refused as a whole (two values at odds), or train for long: not these together."""
    try:
        config = build_train_config(**_run_args(fields))
    except ConfigError:
        return False
    return 0 < config.max_steps <= 10 or (config.max_steps == -1 and config.num_train_epochs <= 5)


def _combine(taken: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """As few runs as can hold every taken value: run k takes the first value of each field not yet placed."""
    runs, pending = [], list(taken)
    while pending:
        run: dict[str, str] = {}
        for case in list(pending):
            name, _label, value = case
            if name not in run and _fits({**run, name: value}):
                run[name] = value
                pending.remove(case)
        assert run, f"no run can take {pending[0]}"
        runs.append(run)
    return runs


def _train(fields: dict[str, str], uri: str, index: int, tmp_path: Path):
    args = {"output_dir": str(tmp_path / f"out{index}"), "experiment_name": "fuzz", **_run_args(fields)}
    saved = dict(os.environ)
    try:  # train exports what the libraries read: it stays with this run
        return CliRunner().invoke(main, ["train", *(f"--{k.replace('_', '-')}={v}" for k, v in args.items())],
                                  env={"MLFLOW_TRACKING_URI": uri, "MLFLOW_RUN_ID": None})
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.slow
def test_every_train_value_its_check_takes_trains_for_real(store, cache_dir, tmp_path):
    folder, uri = store
    taken = [case for case in _cases(train_command, tmp_path) if not _train_refuses(case[0], case[2])]
    runs, finished, later = _combine(taken), [], []
    for index, fields in enumerate(runs):
        while True:
            before = _digest(folder)
            result = _train(fields, uri, index, tmp_path)
            if result.exit_code == 0:
                break
            line = _refused_in_one_line(result, result.stderr.partition(":")[2].split(":")[0].strip())
            name = line.removeprefix("error: ").split(":")[0]
            assert name in ALLOWED_LATER and name in fields, (fields, line)  # known only once loaded
            assert _digest(folder) == before and no_running_runs(uri) == []  # refused before any run
            later.append((name, fields.pop(name)))
        run_id = result.stdout.split("run ", 1)[1].split(" ", 1)[0]
        run = MlflowClient(uri).get_run(run_id)
        assert run.info.status == "FINISHED", run.data.tags.get("error")
        logged, _full = prepare_params(build_train_config(**_run_args(fields)).to_params())  # as train logs them
        assert {k: run.data.params.get(k) for k in fields if k in logged} == \
            {k: logged[k] for k in fields if k in logged}  # the values taken are the values the run ran with
        finished.append(run)
    print(f"train: {len(taken)} values taken by the checks, {len(later)} refused once loaded, "
          f"{len(taken) - len(later)} trained in {len(runs)} runs")
    assert len(finished) == len(runs) and no_running_runs(uri) == []
