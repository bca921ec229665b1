"""Secrets in hf_args are refused with one line that never holds them (the environment is the way in);
a password in the tracking URI is never printed, by the project or by MLflow in its process.

A token in the environment through a whole run is in test_params_e2e.py (and test_auth.py); the credential
move and the URI forms one at a time are in test_credentials.py.
"""

from __future__ import annotations

import re
import shlex
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest

from bridgetower_mlflow.config import build_train_config
from bridgetower_mlflow.errors import ConfigError

from tests.conftest import AUTH_ADMIN, mlflow_run, no_running_runs, run_cli

TOKEN = "hf_" + "Kp4" * 12
MLFLOW_LOG_LINE = re.compile(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ mlflow[.\w]*: ")  # `mlflow run`'s own logger
HUB_REFUSAL = ("error: hf_args: invalid value '--hub_token ***'; allowed: flags without secrets (MLflow stores every "
               "-P value in plain text); set the HF_TOKEN environment variable instead")


@pytest.mark.parametrize("hf_args, shown, variable", [
    (f"--hub_token {TOKEN}", "'--hub_token ***'", "HF_TOKEN"),
    (f"--warmup_steps 2 --hub-token={TOKEN} --seed 3", "'--warmup_steps 2 --hub-token=***'", "HF_TOKEN"),
    (f"--hub_token '{TOKEN}", "'--hub_token ***'", "HF_TOKEN"),  # unclosed quote: refused before the parse error
    (f"--wandb_api_key {TOKEN}", "'--wandb_api_key ***'", "put --wandb_api_key's value in the environment variable"),
    (f"--db-password={TOKEN}", "'--db-password=***'", "put --db-password's value in the environment variable"),
    (f"--client_secret \"{TOKEN} x\"", "'--client_secret ***'", "put --client_secret's value in the environment"),
    (("--hub_token", TOKEN), "'--hub_token ***'", "HF_TOKEN"),  # the rank command line passes words
])
def test_secret_flags_are_refused_without_their_value(hf_args, shown, variable):
    with pytest.raises(ConfigError) as caught:
        build_train_config(hf_args=hf_args)
    message = str(caught.value)
    assert message.startswith(f"hf_args: invalid value {shown}; allowed: flags without secrets")
    assert variable in message and TOKEN not in message and "\n" not in message


def test_flags_that_only_mention_tokens_pass():
    words = build_train_config(hf_args="--include_tokens_per_second true --average_tokens_across_devices false").hf_args
    assert words == ("--include_tokens_per_second", "true", "--average_tokens_across_devices", "false")


def _files_holding(folder: Path, secret: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_cli_refuses_a_hub_token_in_hf_args_with_one_line(sqlite_uri, tmp_path):
    done = run_cli(["train", "--max-steps", "2", "--hf-args", f"--hub_token {TOKEN}"])
    assert done.returncode == 2
    assert done.stderr.splitlines() == [HUB_REFUSAL] and done.stdout == ""
    assert _files_holding(tmp_path, TOKEN) == []  # refused before any store or output exists


def _store_rows_holding(db: Path, secret: str) -> list[str]:
    """Every row of the sqlite store (its logical dump) that holds the secret."""
    with sqlite3.connect(db) as connection:
        return [line for line in connection.iterdump() if secret in line]


@pytest.mark.slow
def test_mlflow_run_refuses_a_hub_token_and_only_mlflow_itself_keeps_it(sqlite_uri, tmp_path):
    done = mlflow_run({"hf_args": f"--hub_token {TOKEN}", "max_steps": 2}, "secrets")
    assert done.returncode != 0
    printed = (done.stdout + done.stderr).splitlines()
    # MLflow echoes the command it runs (with every -P value); nothing else printed may hold the token
    echoed = [line for line in printed if TOKEN in line]
    assert len(echoed) == 1 and " INFO mlflow.projects.backend.local: === Running command " in echoed[0], echoed
    assert [line for line in printed if line.strip() and not MLFLOW_LOG_LINE.match(line)] == [HUB_REFUSAL], printed
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sqlite_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("secrets").experiment_id])
    assert run.info.status == "FAILED" and no_running_runs(sqlite_uri) == []
    assert run.data.tags["error"] == HUB_REFUSAL.removeprefix("error: ")
    assert all(TOKEN not in value for value in run.data.tags.values())
    # MLflow logged every -P value as a param before our code ran: that row is the only one holding it
    (row,) = _store_rows_holding(tmp_path / "mlflow.db", TOKEN)
    assert row.startswith('INSERT INTO "params" VALUES(\'hf_args\',') and run.info.run_id in row
    assert [f for f in _files_holding(tmp_path, TOKEN) if not f.endswith("mlflow.db")] == []  # no artifact


TINY = {"max_steps": 3, "throughput_warmup_steps": 1, "logging_steps": 1, "per_device_train_batch_size": 8,
        "dataloader_num_workers": 0, "max_train_samples": 16, "max_eval_samples": 8, "log_model": "false"}
TINY_ARGS = [word for key, value in TINY.items() for word in (f"--{key.replace('_', '-')}", str(value))]


def _every_tracking_command(experiment: str) -> list:
    """train, a one-cell sweep (its train child and compare), compare and `mlflow run -e train`, all real."""
    sweep_args = ["--workers", "0", "--device-decode", "false", "--repeats", "1", "--experiment-name", experiment,
                  "--max-steps", "3", "--per-device-train-batch-size", "8", "--", "--throughput-warmup-steps", "1",
                  "--max-train-samples", "16", "--max-eval-samples", "8", "--log-model", "false"]
    done = [run_cli(["train", *TINY_ARGS, "--experiment-name", experiment]), run_cli(["sweep", *sweep_args]),
            run_cli(["compare", "--experiment-name", experiment]), mlflow_run({"accel": "cpu", **TINY}, experiment)]
    for process in done:
        assert process.returncode == 0, (process.args, process.stdout[-2000:], process.stderr[-3000:])
    return done


MLFLOW_RUN_ENDING = ("🏃 View run ", "🧪 View experiment at: ")


def _ours(process) -> list[str]:
    """Every line a command printed, less the two `mlflow run`'s own process prints last, ending the run.

    MLflow 3.x compares the run's status string with its status numbers, so `mlflow run` ends the run again
    after train did, printing its own tracking URI: the one the user gave that process, which is MLflow's.
    """
    lines = process.stdout.splitlines()
    if process.args[1] == "run" and [line[:len(p)] for line, p in zip(lines[-2:], MLFLOW_RUN_ENDING)] == \
            list(MLFLOW_RUN_ENDING):
        lines = lines[:-2]
    return lines + process.stderr.splitlines()


def _printed_lines_holding(done: list, secrets: list[str]) -> list[str]:
    """`<command>: <line>` for each line printed by us, stdout or stderr, that holds any part of a secret."""
    return [f"{process.args[1]} {process.args[2]}: {line}" for process in done for line in _ours(process)
            if any(secret in line for secret in secrets)]


def _stored_values_holding(uri: str, experiment: str, secrets: list[str]) -> list[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert runs and {run.info.status for run in runs} == {"FINISHED"}
    return [f"{run.info.run_id} {key}" for run in runs for key, value in {**run.data.tags, **run.data.params}.items()
            if any(secret in value for secret in secrets)]


@pytest.mark.slow
def test_a_database_password_in_the_tracking_uri_is_never_printed(cache_dir, postgres, monkeypatch):
    import psycopg2

    password = "pg-Pw-3391/secret"  # trust auth takes any password: what matters is where it shows
    connection = psycopg2.connect(host="127.0.0.1", port=postgres.port, user="postgres", dbname="postgres")
    connection.autocommit = True
    connection.cursor().execute("DROP DATABASE IF EXISTS secrets")
    connection.cursor().execute("CREATE DATABASE secrets")
    connection.close()
    uri = f"postgresql+psycopg2://postgres:{quote(password, safe='')}@127.0.0.1:{postgres.port}/secrets"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    done = _every_tracking_command("pg-secrets")
    secrets = [password, quote(password, safe=""), "Pw-3391"]
    assert _printed_lines_holding(done, secrets) == []
    assert _stored_values_holding(uri, "pg-secrets", secrets) == []
    # the hint is still a command to run: the URI as one word, the password's place marked and named
    (line,) = [line for line in done[0].stdout.splitlines() if line.startswith("open it: ")]
    hint = line.split("(first run: ", 1)[1].removesuffix(")")
    command, _, note = hint.partition("; ")
    assert shlex.split(command)[:3] == ["mlflow", "ui", "--backend-store-uri"]
    assert shlex.split(command)[3].replace("***", quote(password, safe="")) == uri
    assert note == "the password is left out: write it in place of ***"


@pytest.mark.slow
def test_a_password_in_an_http_tracking_uri_is_never_printed(cache_dir, basic_auth_server, monkeypatch):
    from mlflow.server import get_app_client

    user, password = "ci@bench", "p@ss:w/rd-4471-secret"  # both need percent-encoding in a URI
    for key, value in AUTH_ADMIN.items():
        monkeypatch.setenv(key, value)
    get_app_client("basic-auth", tracking_uri=basic_auth_server.url).create_user(username=user, password=password)
    for key in AUTH_ADMIN:
        monkeypatch.delenv(key)
    netloc = basic_auth_server.url.removeprefix("http://")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://{quote(user, safe='')}:{quote(password, safe='')}@{netloc}")
    done = _every_tracking_command("http-secrets")  # exit 0: the moved credentials reached every process
    secrets = [password, quote(password, safe=""), "4471-secret"]  # the tail: no part shows
    assert _printed_lines_holding(done, secrets) == []
    assert any("View run " in line and f" at: {basic_auth_server.url}/#/experiments/" in line
               for line in done[0].stdout.splitlines()), done[0].stdout  # MLflow's own line, without userinfo
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
    assert _stored_values_holding(basic_auth_server.url, "http-secrets", secrets) == []
