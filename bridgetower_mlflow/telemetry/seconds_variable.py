"""A number of seconds from an environment variable: unset or empty gives the default, anything else that is not
a finite number in range is a ConfigError naming the variable. Stdlib only."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..errors import ConfigError


def seconds_variable(environ: Mapping[str, str], name: str, default: float, allowed: str,
                     zero_allowed: bool = False) -> float:
    """The variable's seconds; `allowed` is the refusal's text (what the user may set)."""
    text = (environ.get(name) or "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and (seconds >= 0 if zero_allowed else seconds > 0)):
        raise ConfigError(name, text, allowed)
    return seconds
