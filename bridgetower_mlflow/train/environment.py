"""The environment variables a `train` run reads, read and checked once where it starts: a bad value is one line
naming the variable (exit 2) before any run exists, and nothing later reads the environment for them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..telemetry.progress_settings import progress_seconds
from ..telemetry.seconds_variable import seconds_variable
from ..telemetry.system_metrics_settings import SystemMetricsSettings, system_metrics_settings

FLUSH_TIMEOUT_ENV = "BRIDGETOWER_FLUSH_TIMEOUT"
DEFAULT_FLUSH_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class RunEnvironment:
    progress_seconds: float = 10.0  # BRIDGETOWER_PROGRESS_SECONDS
    system_metrics: SystemMetricsSettings = field(default_factory=SystemMetricsSettings)  # MLflow's own variables
    flush_timeout_s: float = DEFAULT_FLUSH_TIMEOUT_S  # how long the run's end waits for the tracking server


def read_environment(environ: Mapping[str, str] = os.environ) -> RunEnvironment:
    """Every variable the run reads, checked; ConfigError names the first bad one."""
    return RunEnvironment(progress_seconds(environ), system_metrics_settings(environ), _flush_timeout(environ))


def _flush_timeout(environ: Mapping[str, str]) -> float:
    return seconds_variable(environ, FLUSH_TIMEOUT_ENV, DEFAULT_FLUSH_TIMEOUT_S,
                            f"allowed: seconds, a number above 0 (unset: {DEFAULT_FLUSH_TIMEOUT_S:g})")
