"""What every command shares: the one error path, dual-spelled options, true/false options."""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import click

from .environment import project_run_id
from .errors import BridgeTowerMlflowError

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def mark_project_run_failed(message: str) -> None:
    """A run `mlflow run` created must not stay RUNNING when a command fails before its own session."""
    from .launch.ranks import RankInfo  # the one reader of launcher variables (RANK, OMPI_*, PMI_*)

    run_id = project_run_id()
    if not run_id or not RankInfo.from_env().is_main:
        return
    try:
        from mlflow.tracking import MlflowClient

        from .tracking.runs import FAILED, settle_run

        settle_run(MlflowClient(), run_id, FAILED, message)
    except Exception:  # noqa: BLE001 - the tracking server may be the problem; mlflow run marks it too
        pass


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Project errors become `error: <one line>` on stderr and the error's exit status."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except BridgeTowerMlflowError as exc:
            from .contract import ERROR_TAG_LIMIT
            from .redact import first_line

            # redacted (a misspelled secret flag still echoes its value) and cut as the run's error tag is
            message = first_line(exc, ERROR_TAG_LIMIT)
            mark_project_run_failed(message)
            click.echo(f"error: {message}", err=True)
            sys.exit(exc.exit_code)

    return wrapper


class OneLineUsageError(click.ClickException):
    """Click's own argument errors (a missing value, an unknown option) as every other error: one line, exit 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


@contextlib.contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Turn click's usage errors (usage text, a hint, then the error) into the project's one line."""
    try:
        yield
    except click.UsageError as exc:
        name = exc.param.name if isinstance(exc, click.BadParameter) and exc.param is not None else None
        message = f"{name}: {exc.format_message()}" if name else exc.format_message()
        mark_project_run_failed(message)
        raise OneLineUsageError(message) from None


def dual_option(name: str, *extra_names: str, **kwargs: Any) -> Callable[[F], F]:
    """`--a-b` and `--a_b` both work (`mlflow run` appends extra parameters as `--a_b value`)."""
    dashed = name.replace("_", "-")
    names = [f"--{dashed}"] + ([f"--{name}"] if dashed != name else []) + list(extra_names)
    return click.option(*names, name, **kwargs)


def bool_option(name: str, help_text: str, default: str = "false") -> Callable[[F], F]:
    """A flag that also takes a value, so MLproject can pass `--dry-run false`."""
    return dual_option(name, is_flag=False, flag_value="true", default=default, show_default=True,
                       metavar="[true|false]", help=help_text)


def setup_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("bridgetower_mlflow").setLevel(logging.INFO)
