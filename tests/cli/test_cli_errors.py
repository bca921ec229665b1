"""The one error path: every project error is one redacted `error:` line with the error's exit status."""

from __future__ import annotations

import click
from click.testing import CliRunner

from bridgetower_mlflow.cli_support import reports_errors
from bridgetower_mlflow.errors import ConfigError, OutputUnwritable


def _command(exc):
    @click.command()
    @reports_errors
    def failing():
        raise exc

    return failing


def test_a_secret_in_an_error_message_is_replaced():
    token = "hf_" + "Zq8" * 10
    done = CliRunner().invoke(_command(ConfigError("hf_args", f"--hub_tokn {token}", "allowed: flags")))
    assert done.exit_code == 2
    assert token not in done.output and "'--hub_tokn ***'" in done.output


def test_only_the_first_line_and_the_errors_own_status():
    done = CliRunner().invoke(_command(OutputUnwritable("output_dir: cannot write into 'x'\nsecond line")))
    assert done.exit_code == 2 and done.output == "error: output_dir: cannot write into 'x'\n"


def test_only_rank_zero_marks_the_project_run_failed_whatever_the_launcher(monkeypatch, sqlite_uri):
    """mpirun (gaudi_spawn) sets OMPI_COMM_WORLD_RANK, not RANK: rank 1's failure must leave rank 0's run alone."""
    import mlflow

    from bridgetower_mlflow.cli_support import mark_project_run_failed

    mlflow.set_tracking_uri(sqlite_uri)
    client = mlflow.MlflowClient()
    run_id = client.create_run(client.create_experiment("ranks")).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    monkeypatch.delenv("RANK", raising=False)
    for key, value in (("OMPI_COMM_WORLD_RANK", "1"), ("PMI_RANK", "3")):
        monkeypatch.setenv(key, value)
        mark_project_run_failed("rank died")
        assert client.get_run(run_id).info.status == "RUNNING"
        monkeypatch.delenv(key)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    mark_project_run_failed("rank 0 died")
    assert client.get_run(run_id).info.status == "FAILED"
