"""Every environment variable the project reads, read here, and the one cache folder. Stdlib only.

Each command takes what it needs from here: `train` reads its RunEnvironment once at its entry (a bad value is one
line naming the variable, exit 2, before any run exists; nothing later reads them again); every other variable is
one function, called where its value is used, since a test or a launcher may set it after this module loads.
Nothing else reads os.environ but launch/ranks.py, which keeps the launchers' own (RANK, OMPI_*, PMI_*, ...).
What a command sets for the libraries it loads and hands to the processes it starts goes through here too.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError

# --- MLflow's variables ---------------------------------------------------------------------------
PROJECT_RUN_ENV = "MLFLOW_RUN_ID"  # the run `mlflow run`, a sweep or a launcher made for this process
EXPERIMENT_NAME_ENV, EXPERIMENT_ID_ENV = "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
TRACKING_USER_ENV, TRACKING_PASSWORD_ENV = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"
SYSTEM_METRICS_ENV = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"
SAMPLING_INTERVAL_ENV = "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL"
# read only to redact their values wherever they appear (params, tags, messages)
SECRET_VARIABLES = (TRACKING_PASSWORD_ENV, "MLFLOW_TRACKING_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                    "MLFLOW_TRACKING_CLIENT_CERT_PATH", "AWS_SECRET_ACCESS_KEY", "DATABRICKS_TOKEN")
# --- the project's own ------------------------------------------------------------------------------
CACHE_ENV = "BRIDGETOWER_MLFLOW_CACHE"
PROGRESS_SECONDS_ENV = "BRIDGETOWER_PROGRESS_SECONDS"
FLUSH_TIMEOUT_ENV = "BRIDGETOWER_FLUSH_TIMEOUT"
SWEEP_CELL_ENV = "BRIDGETOWER_SWEEP_CELL"  # "1" in a sweep's train processes: the sweep owns their output folder
LAUNCHED_ENV = "BRIDGETOWER_LAUNCHED"  # "1" in every rank the project's own launcher starts
TRAIN_CMD_ENV = "BRIDGETOWER_TRAIN_CMD"  # replaces a sweep cell's `python -m bridgetower_mlflow train` (tests)
IMAGE_BACKEND_ENV = "BRIDGETOWER_IMAGE_BACKEND"  # `pillow` forces the CPU decode's fallback
GAUDI_PATH_ENV = "BRIDGETOWER_GAUDI_PATH"  # force Gaudi's native path on a stack that has optimum-habana
DEV_DIR_ENV = "BRIDGETOWER_DEV_DIR"  # where Gaudi device nodes are looked for (default /dev; tests fake them)
# --- the libraries' and launchers' own --------------------------------------------------------------
THREADS_ENV = "OMP_NUM_THREADS"
TORCHELASTIC_ENV = "TORCHELASTIC_RUN_ID"  # set by torchrun in its ranks
RAY_ADDRESS_ENV = "RAY_ADDRESS"
HPU_LAZY_MODE_ENV = "PT_HPU_LAZY_MODE"
CUDA_VISIBLE_ENV, CUDA_ORDER_ENV = "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"
HABANA_VISIBLE_ENV = "HABANA_VISIBLE_MODULES"
# tokenizers' fork warning and datasets' progress bars: the run prints its own progress
QUIET_LIBRARIES = {"TOKENIZERS_PARALLELISM": "false", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}

DEFAULT_PROGRESS_SECONDS = 10.0
DEFAULT_FLUSH_TIMEOUT_S = 120.0
DEFAULT_SAMPLING_INTERVAL_S = 2.0
TRUE_VALUES, FALSE_VALUES = ("true", "1"), ("false", "0")  # what MLflow's boolean variables accept


def cache_folder() -> Path:
    """The project's cache (sample set, tokenizer, FLOP counts, spill files): BRIDGETOWER_MLFLOW_CACHE, else
    ~/.cache/bridgetower-mlflow."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "bridgetower-mlflow")


# --- train's variables, read and checked once ---------------------------------------------------------


@dataclass(frozen=True)
class SystemMetricsSettings:
    """MLflow's own system-metrics variables as the project's monitor honours them: unset, the `system/...`
    series are on (MLflow's default is off) and sampled every 2 s."""

    enabled: bool = True
    interval_s: float = DEFAULT_SAMPLING_INTERVAL_S


@dataclass(frozen=True)
class RunEnvironment:
    """What a `train` run reads from the environment."""

    progress_seconds: float = DEFAULT_PROGRESS_SECONDS  # between progress lines; 0: every step
    system_metrics: SystemMetricsSettings = field(default_factory=SystemMetricsSettings)
    flush_timeout_s: float = DEFAULT_FLUSH_TIMEOUT_S  # how long the run's end waits for the tracking server
    sweep_cell: bool = False  # a sweep's train process: the sweep holds the output folder
    project_run_id: str | None = None  # the run `mlflow run`, a sweep or a launcher made for this one


def read_run_environment(environ: Mapping[str, str] = os.environ) -> RunEnvironment:
    """Every variable a train run reads, checked; ConfigError names the first bad one."""
    return RunEnvironment(progress_seconds(environ), system_metrics_settings(environ), _flush_timeout(environ),
                          environ.get(SWEEP_CELL_ENV) == "1", environ.get(PROJECT_RUN_ENV) or None)


def seconds_variable(environ: Mapping[str, str], name: str, default: float, allowed: str,
                     zero_allowed: bool = False) -> float:
    """A number of seconds: unset or empty gives `default`; anything but a finite number in range is a ConfigError
    naming the variable, with `allowed` as its text."""
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


def progress_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between training's progress lines (default 10; 0: every step)."""
    return seconds_variable(environ, PROGRESS_SECONDS_ENV, DEFAULT_PROGRESS_SECONDS, "allowed: seconds, a number >= 0",
                            zero_allowed=True)


def system_metrics_settings(environ: Mapping[str, str] = os.environ) -> SystemMetricsSettings:
    """Both of MLflow's system-metrics variables; a value MLflow would not read is a ConfigError."""
    return SystemMetricsSettings(_system_metrics_enabled(environ.get(SYSTEM_METRICS_ENV)),
                                 seconds_variable(environ, SAMPLING_INTERVAL_ENV, DEFAULT_SAMPLING_INTERVAL_S,
                                                  "allowed: a number of seconds above 0 "
                                                  f"(unset: {DEFAULT_SAMPLING_INTERVAL_S:g})"))


def _system_metrics_enabled(raw: str | None) -> bool:
    if raw is None or not raw.strip():
        return True
    word = raw.strip().lower()
    if word not in TRUE_VALUES + FALSE_VALUES:
        raise ConfigError(SYSTEM_METRICS_ENV, raw, "allowed: true or false (also 1 or 0), as MLflow reads it")
    return word in TRUE_VALUES


def _flush_timeout(environ: Mapping[str, str]) -> float:
    return seconds_variable(environ, FLUSH_TIMEOUT_ENV, DEFAULT_FLUSH_TIMEOUT_S,
                            f"allowed: seconds, a number above 0 (unset: {DEFAULT_FLUSH_TIMEOUT_S:g})")


# --- MLflow's variables, where the other commands use them --------------------------------------------


def project_run_id() -> str | None:
    """The run `mlflow run` (or a sweep, or a launcher) made for this process, if any."""
    return os.environ.get(PROJECT_RUN_ENV) or None


def experiment_from_environment() -> tuple[str | None, str | None]:
    """(MLFLOW_EXPERIMENT_NAME, MLFLOW_EXPERIMENT_ID), each None when unset or empty."""
    return os.environ.get(EXPERIMENT_NAME_ENV) or None, os.environ.get(EXPERIMENT_ID_ENV) or None


def tracking_user() -> str | None:
    """Who the tracking server knows this process as (basic auth), if set."""
    return os.environ.get(TRACKING_USER_ENV) or None


def tracking_uri() -> str:
    """MLFLOW_TRACKING_URI as set, or empty (MLflow's default store then)."""
    return os.environ.get(TRACKING_URI_ENV, "")


def tracking_credentials() -> dict[str, str]:
    """The tracking URI and the user and password MLflow sends, those of them that are set."""
    names = (TRACKING_URI_ENV, TRACKING_USER_ENV, TRACKING_PASSWORD_ENV)
    return {name: os.environ[name] for name in names if name in os.environ}


def secret_values() -> list[str]:
    """The values of the secret variables set in this process (4 characters or more: shorter is no secret)."""
    return [os.environ[name] for name in SECRET_VARIABLES if len(os.environ.get(name, "")) >= 4]


# --- processes ------------------------------------------------------------------------------------------


def self_launched() -> bool:
    """True in a rank the project's own launcher started."""
    return os.environ.get(LAUNCHED_ENV) == "1"


def train_command_override() -> str:
    """BRIDGETOWER_TRAIN_CMD: what a sweep cell runs instead of train ("" when unset)."""
    return os.environ.get(TRAIN_CMD_ENV, "")


def ray_address() -> str:
    """RAY_ADDRESS, what ray.init("auto") would use ("" when unset)."""
    return os.environ.get(RAY_ADDRESS_ENV, "").strip()


def torch_threads() -> str | None:
    """OMP_NUM_THREADS as set in this process, if it is."""
    return os.environ.get(THREADS_ENV)


def threads_variables() -> dict[str, str]:
    """What tells a rank whether the user chose its threads: OMP_NUM_THREADS, and torchrun's mark."""
    return {name: os.environ[name] for name in (THREADS_ENV, TORCHELASTIC_ENV) if name in os.environ}


def parent_environment() -> dict[str, str] | None:
    """The environment this process's parent was started with (None where /proc cannot tell)."""
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as handle:
            entries = handle.read().split(b"\0")
    except OSError:
        return None
    return dict(entry.decode(errors="replace").split("=", 1) for entry in entries if b"=" in entry)


def for_child_process() -> dict[str, str]:
    """A copy of this process's environment, for a process it starts (which inherits every variable)."""
    return dict(os.environ)


# --- images and device stacks ---------------------------------------------------------------------------


def image_library() -> str:
    """`opencv` (the default) or what BRIDGETOWER_IMAGE_BACKEND forces instead."""
    return os.environ.get(IMAGE_BACKEND_ENV, "opencv")


def cuda_visible_devices() -> list[str]:
    """CUDA_VISIBLE_DEVICES's entries: ordinals, GPU- or MIG- UUIDs ([] when unset or empty)."""
    return _entries(CUDA_VISIBLE_ENV)


def habana_visible_modules() -> list[str]:
    """HABANA_VISIBLE_MODULES's entries: Gaudi module ids ([] when unset or empty)."""
    return _entries(HABANA_VISIBLE_ENV)


def _entries(name: str) -> list[str]:
    return [part.strip() for part in os.environ.get(name, "").split(",") if part.strip()]


def cuda_pci_order() -> bool:
    """True when CUDA numbers its devices in PCI order (CUDA_DEVICE_ORDER=PCI_BUS_ID), as NVML does."""
    return os.environ.get(CUDA_ORDER_ENV) == "PCI_BUS_ID"


def hpu_lazy_mode() -> str | None:
    """PT_HPU_LAZY_MODE as set in this process (by the user, or by train before torch loaded)."""
    return os.environ.get(HPU_LAZY_MODE_ENV)


def gaudi_path_override() -> str | None:
    """BRIDGETOWER_GAUDI_PATH, stripped; None when unset or empty."""
    return os.environ.get(GAUDI_PATH_ENV, "").strip() or None


def device_nodes_folder() -> Path:
    """Where Gaudi's device nodes are looked for."""
    return Path(os.environ.get(DEV_DIR_ENV) or "/dev")


# --- what a command sets ----------------------------------------------------------------------------------


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


def export(values: Mapping[str, str]) -> None:
    """Set `values` in this process, for the libraries it loads and the processes it starts."""
    os.environ.update(values)


@contextlib.contextmanager
def temporarily(values: Mapping[str, str]) -> Iterator[None]:
    """`values` set for the duration of the block; what was there before comes back after it."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
