"""NVIDIA telemetry MLflow's own GPU monitor lacks: clocks, temperature, memory-bus use, the energy counter.

The GPUs are the job's (job_devices: CUDA_VISIBLE_DEVICES over NVML's PCI order), named by NVML
index as the project's MLflow GPU metrics are. Every NVML call fails on its own (MIG and vGPU refuse some).
"""

from __future__ import annotations

import logging
import shutil
import subprocess

from ..base import DeviceSampler
from ..job_devices import job_nvml_handles

log = logging.getLogger(__name__)


class NvmlSampler(DeviceSampler):
    """Per GPU: SM clock, temperature, memory-bus utilization; each call may fail alone."""

    def __init__(self, count: int):
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        try:
            self._handles = job_nvml_handles(pynvml, count)
        except pynvml.NVMLError:
            pynvml.nvmlShutdown()
            raise
        self._unsupported: set[tuple[int, str]] = set()

    def _read(self, index: int, name: str, call):
        if (index, name) in self._unsupported:
            return None
        try:
            return float(call())
        except self._nvml.NVMLError as exc:
            self._unsupported.add((index, name))
            log.warning("GPU %d: %s unavailable (%s); the other GPU metrics go on", index, name, exc)
            return None

    def sample(self) -> dict[str, float]:
        nvml, metrics = self._nvml, {}
        for index, handle in self._handles:
            readings = {
                "sm_clock_mhz": lambda h=handle: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
                "temperature_celsius": lambda h=handle: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
                "memory_bandwidth_utilization_percentage":
                    lambda h=handle: nvml.nvmlDeviceGetUtilizationRates(h).memory,
            }
            for name, call in readings.items():
                value = self._read(index, name, call)
                if value is not None:
                    metrics[f"gpu_{index}_{name}"] = value
        return metrics

    def energy_joules(self) -> float | None:
        """Total energy of these GPUs since their driver loaded (NVML, mJ; Volta and newer), or None."""
        try:
            return sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) for _, h in self._handles) / 1000.0
        except self._nvml.NVMLError:
            return None

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
