"""`bridgetower-mlflow`: a click group whose subcommands load by name, only when they run.

Nothing is registered at import time, so `--help`, `--version` and argument errors answer before torch,
transformers or mlflow load; an http(s) tracking URI's credentials move out of it before a subcommand loads.
"""

from __future__ import annotations

import importlib

import click

from .cli_support import CONTEXT, one_line_usage_errors, reports_errors
from .tracking.credentials import move_process_credentials

COMMANDS = {
    "train": "bridgetower_mlflow.train.command:train_command",
    "sweep": "bridgetower_mlflow.sweep.command:sweep_command",
    "compare": "bridgetower_mlflow.compare.command:compare_command",
    "promote": "bridgetower_mlflow.promote.command:promote_command",
    "sample-data": "bridgetower_mlflow.utility_commands:sample_data_command",
    "upload-spill": "bridgetower_mlflow.utility_commands:upload_spill_command",
}


class LazyGroup(click.Group):
    """Resolves `COMMANDS[name]` on first use."""

    def make_context(self, *args, **kwargs):
        with one_line_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        # before resolving the subcommand (its import may load mlflow) and before any run starts
        reports_errors(move_process_credentials)()
        with one_line_usage_errors():  # the subcommand's own arguments are parsed in here
            return super().invoke(ctx)

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, _, attribute = COMMANDS[name].partition(":")
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=LazyGroup, context_settings=CONTEXT)
@click.version_option(package_name="bridgetower-mlflow", prog_name="bridgetower-mlflow")
def main():
    """BridgeTower fine-tuning benchmark, tracked in MLflow (Gaudi, NVIDIA, CPU)."""
