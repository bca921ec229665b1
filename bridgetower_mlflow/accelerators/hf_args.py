"""The user's extra TrainingArguments flags (`hf_args`), parsed against the adapter's arguments class."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, NoReturn, cast

from ..errors import ConfigError

if TYPE_CHECKING:
    from transformers.hf_argparser import DataClassType


def hf_args_overrides(args_class: type, hf_args: tuple) -> dict:
    """Typed values for the flags the user passed in hf_args; ConfigError on unknown or bad ones."""
    if not hf_args:
        return {}
    from transformers import HfArgumentParser

    def fail(message: str) -> NoReturn:
        raise ConfigError("hf_args", " ".join(hf_args), f"allowed: {args_class.__name__} flags ({message})")

    class Parser(HfArgumentParser):
        def error(self, message: str) -> NoReturn:  # argparse's would print and exit the process
            fail(message)

    parser = Parser(cast("DataClassType", args_class))  # transformers' NewType over Any for a dataclass type
    parser.allow_abbrev = False  # `--max_step 5` would set max_steps past the owned-flag check (and not be applied)
    namespace, unknown = parser.parse_known_args(["--output_dir", "unused", *hf_args])
    if unknown:
        fail(f"unknown flag {unknown[0]}")
    given = {a.split("=", 1)[0] for a in hf_args if a.startswith("--")}
    overrides = {}
    for action in parser._actions:
        if given.intersection(action.option_strings) and action.dest != "output_dir":
            overrides[action.dest] = getattr(namespace, action.dest)
    return overrides


def shared_kwargs(args_class: type, settings) -> dict:
    """The shared TrainingArguments kwargs, with what `args_class` would otherwise make up per process."""
    kwargs = dict(settings.training_kwargs)
    if any(f.name == "logging_dir" for f in dataclasses.fields(args_class)):
        # transformers 4.x's default holds the start time: a resumed run's params would never match its own
        kwargs.setdefault("logging_dir", os.path.join(kwargs["output_dir"], "logs"))
    return kwargs


def merged_kwargs(args_class: type, settings) -> dict:
    """The shared TrainingArguments kwargs with the user's hf_args on top."""
    return {**shared_kwargs(args_class, settings), **hf_args_overrides(args_class, settings.hf_args)}
