"""How often training prints its progress line: `BRIDGETOWER_PROGRESS_SECONDS` (default 10; 0: every step).
Stdlib only: train's entry checks it before anything imports torch or transformers."""

from __future__ import annotations

import os
from collections.abc import Mapping

from .seconds_variable import seconds_variable

PROGRESS_SECONDS_ENV = "BRIDGETOWER_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 10.0


def progress_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between progress lines, from the environment; a bad value is refused (ConfigError)."""
    return seconds_variable(environ, PROGRESS_SECONDS_ENV, DEFAULT_PROGRESS_SECONDS, "allowed: seconds, a number >= 0",
                            zero_allowed=True)
