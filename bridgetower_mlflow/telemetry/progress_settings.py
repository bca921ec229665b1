"""How often training prints its progress line: `BRIDGETOWER_PROGRESS_SECONDS` (default 10; 0: every step).
Stdlib only: train's entry checks it before anything imports torch or transformers."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from ..errors import ConfigError

PROGRESS_SECONDS_ENV = "BRIDGETOWER_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 10.0


def progress_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between progress lines, from the environment; a bad value is refused (ConfigError)."""
    text = (environ.get(PROGRESS_SECONDS_ENV) or "").strip()
    if not text:
        return DEFAULT_PROGRESS_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(PROGRESS_SECONDS_ENV, text, "allowed: seconds, a number >= 0")
    return seconds
