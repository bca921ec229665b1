"""The environment variables a `train` run reads, read and checked once where it starts (a bad value is one line
naming the variable, exit 2, before any run exists; nothing later reads the environment for them), and the ones it
exports for the libraries it loads, set in one place before any of them is imported."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field

from ..contract import SWEEP_CELL_ENV
from ..telemetry.progress_settings import progress_seconds
from ..telemetry.seconds_variable import seconds_variable
from ..telemetry.system_metrics_settings import SystemMetricsSettings, system_metrics_settings

FLUSH_TIMEOUT_ENV = "BRIDGETOWER_FLUSH_TIMEOUT"
PROJECT_RUN_ENV = "MLFLOW_RUN_ID"
DEFAULT_FLUSH_TIMEOUT_S = 120.0
# tokenizers' fork warning and datasets' progress bars: the run prints its own progress
QUIET_LIBRARIES = {"TOKENIZERS_PARALLELISM": "false", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


@dataclass(frozen=True)
class RunEnvironment:
    progress_seconds: float = 10.0  # BRIDGETOWER_PROGRESS_SECONDS
    system_metrics: SystemMetricsSettings = field(default_factory=SystemMetricsSettings)  # MLflow's own variables
    flush_timeout_s: float = DEFAULT_FLUSH_TIMEOUT_S  # how long the run's end waits for the tracking server
    sweep_cell: bool = False  # a sweep's train process (BRIDGETOWER_SWEEP_CELL=1): the sweep holds the output folder
    project_run_id: str | None = None  # MLFLOW_RUN_ID: the run `mlflow run`, a sweep or a launcher made for this one


def read_environment(environ: Mapping[str, str] = os.environ) -> RunEnvironment:
    """Every variable the run reads, checked; ConfigError names the first bad one."""
    return RunEnvironment(progress_seconds(environ), system_metrics_settings(environ), _flush_timeout(environ),
                          environ.get(SWEEP_CELL_ENV) == "1", environ.get(PROJECT_RUN_ENV) or None)


def _flush_timeout(environ: Mapping[str, str]) -> float:
    return seconds_variable(environ, FLUSH_TIMEOUT_ENV, DEFAULT_FLUSH_TIMEOUT_S,
                            f"allowed: seconds, a number above 0 (unset: {DEFAULT_FLUSH_TIMEOUT_S:g})")


def export_for_libraries(*settings: Mapping[str, str],
                         environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Export what the libraries read from the environment (the accelerator stack's mode before torch loads it, the
    names torch.distributed reads where a launcher set only its own, the quiet settings); a value the user set
    wins. Returns what was exported."""
    exported = {}
    for key, value in {**QUIET_LIBRARIES, **{k: v for each in settings for k, v in each.items()}}.items():
        if key not in environ:
            environ[key] = exported[key] = value
    return exported
