"""Gaudi telemetry through HLML (PyPI habana-pyhlml, module `pyhlml`), which does not import habana_frameworks.torch
(it must not load before the Gaudi config exists). HLML lists every device of the host: the job's are those of
HABANA_VISIBLE_MODULES (module ids), named by HLML index."""

from __future__ import annotations

from functools import partial

from .hpu_readings import MB, HpuReading, hpu_metrics
from .job_devices import job_hlml_handles
from .vendor_library import VendorLibrarySampler


class HlmlSampler(VendorLibrarySampler):
    """Utilization, memory and power of the job's `count` Gaudi devices via HLML; each call may fail alone."""

    device_label = "HPU"

    def __init__(self, count: int):
        import pyhlml

        pyhlml.hlmlInit()
        self._hlml = pyhlml
        super().__init__(pyhlml.HLMLError, pyhlml.hlmlShutdown, lambda: job_hlml_handles(pyhlml, count),
                         pyhlml.hlmlDeviceGetTotalEnergyConsumption)

    def sample(self) -> dict[str, float]:
        hlml, metrics = self._hlml, {}
        for index, handle in self._handles:
            utilization = self._read(index, "utilization", partial(hlml.hlmlDeviceGetUtilizationRates, handle))
            memory = self._read(index, "memory", partial(hlml.hlmlDeviceGetMemoryInfo, handle))
            power = self._read(index, "power", partial(hlml.hlmlDeviceGetPowerUsage, handle))
            reading = HpuReading(index, utilization.aip if utilization else None,  # a struct: .aip, .memory
                                 memory.used / MB if memory else None, memory.total / MB if memory else None,
                                 power / 1000.0 if power is not None else None)  # HLML reports mW
            metrics.update(hpu_metrics([reading]))
        return metrics
