"""Pure translation of a run's settings into optimum-habana / native-HPU arguments and launch lines.

Nothing here imports habana_frameworks or optimum.habana, so the contract test and the CPU tests can
check exactly what the adapter would pass.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ...contract import STOP_GRACE_SECONDS
from ...environment import GAUDI_PATH_ENV
from ...errors import AcceleratorUnavailable, ConfigError

OPTIMUM_PATH, NATIVE_PATH = "optimum-habana", "native"
DEFAULT_GAUDI_CONFIG_NAME = "Habana/clip"
# Habana/clip gaudi_config.json at 19df4dc9, for machines that cannot reach the Hub
HABANA_CLIP_CONFIG = {"use_fused_adam": True, "use_fused_clip_norm": True, "use_torch_autocast": True}


def choose_gaudi_path(optimum_version: str | None, transformers_requirement: str | None,
                      transformers_version: str, override: str | None = None) -> str:
    """optimum-habana when installed and compatible with transformers, else native."""
    if override:
        if override not in (OPTIMUM_PATH, NATIVE_PATH):
            raise ConfigError(GAUDI_PATH_ENV, override, f"allowed: {OPTIMUM_PATH}, {NATIVE_PATH}")
        if override == OPTIMUM_PATH and optimum_version is None:
            raise AcceleratorUnavailable(f"{GAUDI_PATH_ENV}: {OPTIMUM_PATH} requested but optimum-habana is not "
                                         "installed; allowed: install the gaudi extra, or native")
        if override == NATIVE_PATH:
            return NATIVE_PATH
    if optimum_version is None:
        return NATIVE_PATH
    if transformers_requirement:
        from packaging.specifiers import SpecifierSet

        if transformers_version not in SpecifierSet(transformers_requirement, prereleases=True):
            raise AcceleratorUnavailable(
                f"transformers: {transformers_version} is installed but optimum-habana {optimum_version} needs "
                f"transformers{transformers_requirement}; allowed: install the gaudi extra "
                f"(pip install '.[gaudi]'), or uninstall optimum-habana / set {GAUDI_PATH_ENV}=native"
            )
    return OPTIMUM_PATH


def check_strategy(requested: str, supported: set[str], where: str) -> None:
    if requested != "ddp" and requested not in supported:
        allowed = ", ".join(sorted(supported | {"ddp"}))
        raise ConfigError("distribution_strategy", requested, f"allowed with {where}: {allowed}")


def gaudi_training_kwargs(kwargs: dict, settings, *, gaudi_config_name: str, strategies: set[str] | None) -> dict:
    """GaudiTrainingArguments kwargs (hf_args merged): the study's flags; explicit hf_args values win.

    `strategies` is what the installed GaudiTrainingArguments accepts (None: it has no such field).
    """
    check_strategy(settings.distribution_strategy, strategies or set(), "this optimum-habana")
    kwargs = dict(kwargs)
    for key in ("tf32", "fp16"):  # rejected by GaudiTrainingArguments
        kwargs.pop(key, None)
    kwargs.setdefault("use_habana", True)  # `--use_habana false --use_cpu true`: optimum-habana's own CPU mode
    if kwargs["use_habana"]:
        kwargs.pop("use_cpu", None)
    kwargs.setdefault("use_lazy_mode", True)
    kwargs.setdefault("use_hpu_graphs_for_inference", True)
    if kwargs["use_habana"]:  # refused without it; GaudiTrainer gets the config object either way
        kwargs.setdefault("gaudi_config_name", gaudi_config_name)
    kwargs.setdefault("sdp_on_bf16", True)
    kwargs["throughput_warmup_steps"] = settings.throughput_warmup_steps
    kwargs["bf16"] = settings.precision != "fp32"
    if strategies is not None:
        kwargs["distribution_strategy"] = settings.distribution_strategy
    if settings.world_size > 1:
        kwargs.setdefault("ddp_backend", "hccl")
    return kwargs


def native_training_kwargs(kwargs: dict, settings) -> dict:
    """Plain TrainingArguments kwargs (hf_args merged) on device hpu (transformers picks hpu when present)."""
    check_strategy(settings.distribution_strategy, set(), "the native HPU path (no optimum-habana)")
    kwargs = dict(kwargs)
    for key in ("use_cpu", "tf32", "fp16"):
        kwargs.pop(key, None)
    kwargs["bf16"] = settings.precision != "fp32"
    if settings.world_size > 1:
        kwargs.setdefault("ddp_backend", "hccl")
    return kwargs


def gaudi_config_overrides(precision: str) -> dict:
    """GaudiConfig attributes to change: fp32 runs must not autocast to bf16."""
    return {"use_torch_autocast": False} if precision == "fp32" else {}


def mpirun_command(devices: int, module_argv: list[str], *, physical_cores: int, cores_per_socket: int,
                   master_port: int = 29500, env: dict | None = None) -> list[str]:
    """gaudi_spawn's single-node MPI line: one rank per device, cores split evenly, bound to cores.

    The ranks get the project's stop grace: OpenMPI waits odls_base_sigkill_timeout (1 s by default) after
    its SIGTERM before it SIGKILLs them, whether it stops the job for a signal or for a rank that ended."""
    map_by = "slot" if cores_per_socket == 1 else "socket"  # one core per socket: a VM, as gaudi_spawn does
    per_rank = max(physical_cores // devices, 1)
    exports = {"MASTER_ADDR": "localhost", "MASTER_PORT": str(master_port), **(env or {})}
    return [
        "mpirun", "-n", str(devices), "--bind-to", "core", "--map-by", f"{map_by}:PE={per_rank}",
        "--rank-by", "slot", "--report-bindings", "--allow-run-as-root",
        "--mca", "odls_base_sigkill_timeout", str(int(STOP_GRACE_SECONDS)),
        *[arg for key, value in exports.items() for arg in ("-x", f"{key}={value}")],
        sys.executable, "-m", "bridgetower_mlflow", *module_argv,
    ]


def physical_core_layout() -> tuple[int, int]:
    """(physical cores, cores per socket) from lscpu, else psutil."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=True).stdout
        return parse_lscpu(text)
    except (OSError, subprocess.SubprocessError, ValueError):
        import psutil

        cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
        return cores, cores


def parse_lscpu(text: str) -> tuple[int, int]:
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}
    sockets, per_socket = int(fields["Socket(s)"]), int(fields["Core(s) per socket"])
    return sockets * per_socket, per_socket
