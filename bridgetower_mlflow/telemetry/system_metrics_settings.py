"""MLflow's own system-metrics variables, as the project's monitor honours them. Stdlib only.

MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING: `false` turns the `system/...` series off (unset: on, this project's
default, where MLflow's is off); MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL: seconds between samples (unset: 2).
A value MLflow would not read is a ConfigError naming the variable, the value and what is allowed: one line
where the run's checks read it, never a crash when a module is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError
from .seconds_variable import seconds_variable

ENABLE_VARIABLE = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"
INTERVAL_VARIABLE = "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL"
DEFAULT_INTERVAL_S = 2.0
TRUE_VALUES, FALSE_VALUES = ("true", "1"), ("false", "0")  # what MLflow's boolean variables accept


@dataclass(frozen=True)
class SystemMetricsSettings:
    enabled: bool = True
    interval_s: float = DEFAULT_INTERVAL_S


def system_metrics_settings(environ: Mapping[str, str] = os.environ) -> SystemMetricsSettings:
    """Read both variables once; ConfigError for a value that is not allowed."""
    return SystemMetricsSettings(_enabled(environ.get(ENABLE_VARIABLE)), _interval(environ))


def _enabled(raw: str | None) -> bool:
    if raw is None or not raw.strip():
        return True
    word = raw.strip().lower()
    if word not in TRUE_VALUES + FALSE_VALUES:
        raise ConfigError(ENABLE_VARIABLE, raw, "allowed: true or false (also 1 or 0), as MLflow reads it")
    return word in TRUE_VALUES


def _interval(environ: Mapping[str, str]) -> float:
    return seconds_variable(environ, INTERVAL_VARIABLE, DEFAULT_INTERVAL_S,
                            f"allowed: a number of seconds above 0 (unset: {DEFAULT_INTERVAL_S:g})")
