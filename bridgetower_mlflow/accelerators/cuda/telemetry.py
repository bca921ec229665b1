"""NVIDIA telemetry MLflow's own GPU monitor lacks: clocks, temperature, memory-bus utilization.

MLflow already logs gpu_{i}_utilization/memory/power; this adds only names it does not have.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ..base import DeviceSampler


def visible_nvml_indices(count: int) -> list[int]:
    """NVML (physical) indices of the first `count` GPUs this process may use."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible and all(part.strip().isdigit() for part in visible.split(",")):
        return [int(part) for part in visible.split(",")][:count]
    return list(range(count))


class NvmlSampler(DeviceSampler):
    """Per GPU: SM clock, temperature, memory-bus utilization (fails soft in the caller)."""

    def __init__(self, count: int):
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in visible_nvml_indices(count)}

    def sample(self) -> dict[str, float]:
        nvml, metrics = self._nvml, {}
        for index, handle in self._handles.items():
            prefix = f"gpu_{index}_"
            metrics[prefix + "sm_clock_mhz"] = float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
            metrics[prefix + "temperature_celsius"] = float(
                nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
            )
            metrics[prefix + "memory_bandwidth_utilization_percentage"] = float(
                nvml.nvmlDeviceGetUtilizationRates(handle).memory
            )
        return metrics

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutdown of a telemetry library must never fail a run
            pass


def nvidia_driver_version() -> str | None:
    """The driver version from NVML, else nvidia-smi, else None."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - NVML absent or failing: try the CLI
        pass
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0].strip() if out.strip() else None
