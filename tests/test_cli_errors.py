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
