"""A train command line's options as TrainConfig fields: a sweep checks its cells' pass-through train options with
train's own parsers before any cell starts (one bad value would fail every cell, each in its own run)."""

from __future__ import annotations

from collections.abc import Sequence

from .config import SCHEMA, build_train_config

ALIASES = ("mediapipe_dataloader",)  # train options that are no field of their own


def train_fields(argv: Sequence[str]) -> dict[str, str]:
    """`--max-steps 5 --hf_args=--x` -> {'max_steps': '5', 'hf_args': '--x'}: the options train would read (the last
    of a repeated one wins); words that are no train option are left to train."""
    names = {spec.name for spec in SCHEMA} | set(ALIASES)
    fields: dict[str, str] = {}
    words = iter(argv)
    for word in words:
        name, equals, value = word.removeprefix("--").partition("=")
        name = name.replace("-", "_")
        if not word.startswith("--") or name not in names:
            continue
        given = value if equals else next(words, None)
        if given is not None:
            fields[name] = given
    return fields


def check_train_args(argv: Sequence[str]) -> None:
    """ConfigError, naming the field, for the first train option in `argv` that train would refuse."""
    build_train_config(**train_fields(argv))
