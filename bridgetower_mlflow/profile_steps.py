"""The profiler window's setting, `A-B` (global steps A..B): parsed with the other train options, and checked
against the warmup and max_steps before any run starts. Stdlib only, like the schema that uses it."""

from __future__ import annotations

import re
from typing import Any

from .errors import ConfigError

FIELD = "profile_steps"


def step_range(name: str, value: Any) -> str:
    """`A-B`: the first and last global step of a window (1 <= A <= B), normalized; empty for none."""
    text = str(value).strip()
    if not text:
        return ""
    found = re.fullmatch(r"(\d+)\s*-\s*(\d+)", text)
    if not found or not 1 <= int(found.group(1)) <= int(found.group(2)):
        raise ConfigError(name, value, "allowed: A-B, the first and last global step to profile (1 <= A <= B), "
                                       "or empty for no profile")
    return f"{int(found.group(1))}-{int(found.group(2))}"


def step_window(text: str) -> tuple[int, int] | None:
    """(first, last) of a parsed `A-B`; None for empty."""
    if not text:
        return None
    first, last = text.split("-")
    return int(first), int(last)


def check_profile_window(text: str, warmup: int, max_steps: int) -> None:
    """The window lies after the warmup, within max_steps (when set), and leaves a measured step outside it."""
    window = step_window(text)
    if window is None:
        return
    first, last = window
    if first <= warmup:
        raise ConfigError(FIELD, text, f"allowed: steps after the {warmup} warmup steps (A > {warmup}): the "
                                       "warmup is not the steady state a profile should show")
    if max_steps > 0 and last > max_steps:
        raise ConfigError(FIELD, text, f"allowed: steps within max_steps ({max_steps})")
    if max_steps > 0 and max_steps - warmup - (last - first + 1) < 1:
        raise ConfigError(FIELD, text, "allowed: a window that leaves at least one measured step (profiled steps "
                                       "are kept out of train_samples_per_second)")
