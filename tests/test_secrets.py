"""Secrets in hf_args are refused with one line that never holds them (the environment is the way in).

A token in the environment through a whole run is in test_params_e2e.py (and test_auth.py).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from bridgetower_mlflow.config import build_train_config
from bridgetower_mlflow.errors import ConfigError

from conftest import mlflow_run, no_running_runs, run_cli

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
