"""NVIDIA telemetry MLflow's own GPU monitor lacks: clocks, temperature, memory-bus use, the energy counter.

The GPUs are the job's (job_devices: CUDA_VISIBLE_DEVICES over NVML's PCI order), named by NVML
index as the project's MLflow GPU metrics are. Every NVML call fails on its own (MIG and vGPU refuse some).
"""

from __future__ import annotations

from .job_devices import job_nvml_handles
from .vendor_library import VendorLibrarySampler


class NvmlSampler(VendorLibrarySampler):
    """Per GPU: SM clock, temperature, memory-bus utilization; each call may fail alone."""

    device_label = "GPU"

    def __init__(self, count: int):
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        super().__init__(pynvml.NVMLError, pynvml.nvmlShutdown, lambda: job_nvml_handles(pynvml, count),
                         pynvml.nvmlDeviceGetTotalEnergyConsumption)

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
                    metrics[f"gpu_{index}_{name}"] = float(value)
        return metrics
