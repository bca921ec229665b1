"""Gaudi device facts and telemetry through HLML (PyPI habana-pyhlml, module `pyhlml`) or hl-smi.

Neither source imports habana_frameworks.torch, which must not load before the Gaudi config exists.
Both list every device of the host: the job's are those of HABANA_VISIBLE_MODULES (module ids),
named by HLML / hl-smi index.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass

from ..base import DeviceSampler
from ..job_devices import job_hlml_handles, job_modules

log = logging.getLogger(__name__)
HL_SMI_FIELDS = "index,module_id,utilization.aip,memory.used,memory.total,power.draw"
MB = 1e6  # MLflow's GPU "megabytes" are 10^6 bytes; HPU memory is reported in the same unit
MIB = 2**20  # hl-smi reports memory in MiB


@dataclass(frozen=True)
class HpuReading:
    """One device's sample; None where the device refused that reading."""

    index: int
    utilization: float | None
    memory_used_mb: float | None
    memory_total_mb: float | None
    power_watts: float | None
    module_id: int | None = None  # what HABANA_VISIBLE_MODULES lists


def hpu_metrics(readings: list[HpuReading]) -> dict[str, float]:
    """Readings -> `hpu_{i}_...` names (MLflow's GPU naming with `hpu`; the monitor adds `system/`)."""
    metrics = {}
    for r in readings:
        prefix = f"hpu_{r.index}_"
        values = {"utilization_percentage": r.utilization, "memory_usage_megabytes": r.memory_used_mb,
                  "power_usage_watts": r.power_watts}
        metrics.update({prefix + k: float(v) for k, v in values.items() if v is not None})
        if r.memory_total_mb and r.memory_used_mb is not None:
            metrics[prefix + "memory_usage_percentage"] = round(100.0 * r.memory_used_mb / r.memory_total_mb, 2)
    return metrics


def parse_hl_smi(text: str) -> list[HpuReading]:
    """Parse `hl-smi -Q <HL_SMI_FIELDS> --format csv,noheader,nounits` output."""
    readings = []
    for line in text.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 6 or not parts[0].isdigit():
            raise ValueError(f"unexpected hl-smi line {line!r}; expected {HL_SMI_FIELDS}")
        index, module, util, used, total, power = parts
        used_mb, total_mb = (None if v is None else v * MIB / MB for v in (_number(used), _number(total)))
        module_id = int(module) if module.isdigit() else None
        readings.append(HpuReading(int(index), _number(util), used_mb, total_mb, _number(power), module_id))
    return readings


def _number(text: str) -> float | None:
    """A reading, or None for hl-smi's N/A (absent, not zero)."""
    return float(text.split()[0]) if text and text.split()[0].replace(".", "", 1).isdigit() else None


def run_hl_smi(fields: str) -> str:
    """hl-smi's CSV answer for `fields` (raises OSError/SubprocessError on failure)."""
    return subprocess.run(["hl-smi", "-Q", fields, "--format", "csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=10, check=True).stdout


class HlmlSampler(DeviceSampler):
    """Utilization, memory and power of the job's `count` Gaudi devices via HLML; each call may fail alone."""

    def __init__(self, count: int):
        import pyhlml

        pyhlml.hlmlInit()
        self._hlml = pyhlml
        try:
            self._handles = job_hlml_handles(pyhlml, count)
        except pyhlml.HLMLError:
            pyhlml.hlmlShutdown()
            raise
        self._unsupported: set[tuple[int, str]] = set()

    def _read(self, index: int, name: str, call):
        if (index, name) in self._unsupported:
            return None
        try:
            return call()
        except self._hlml.HLMLError as exc:
            self._unsupported.add((index, name))
            log.warning("HPU %d: %s unavailable (%s); the other HPU metrics go on", index, name, exc)
            return None

    def sample(self) -> dict[str, float]:
        hlml, metrics = self._hlml, {}
        for index, handle in self._handles:
            utilization = self._read(index, "utilization", lambda h=handle: hlml.hlmlDeviceGetUtilizationRates(h))
            memory = self._read(index, "memory", lambda h=handle: hlml.hlmlDeviceGetMemoryInfo(h))
            power = self._read(index, "power", lambda h=handle: hlml.hlmlDeviceGetPowerUsage(h))
            reading = HpuReading(index, utilization.aip if utilization else None,  # a struct: .aip, .memory
                                 memory.used / MB if memory else None, memory.total / MB if memory else None,
                                 power / 1000.0 if power is not None else None)  # HLML reports mW
            metrics.update(hpu_metrics([reading]))
        return metrics

    def energy_joules(self) -> float | None:
        """Total energy of these devices since their driver loaded (HLML, mJ), or None."""
        try:
            return sum(self._hlml.hlmlDeviceGetTotalEnergyConsumption(h) for _, h in self._handles) / 1000.0
        except self._hlml.HLMLError:
            return None

    def close(self) -> None:
        try:
            self._hlml.hlmlShutdown()
        except Exception:  # noqa: BLE001 - shutdown of a telemetry library must never fail a run
            pass


class HlSmiSampler(DeviceSampler):
    """The same metrics from the hl-smi CLI, when pyhlml is not installed."""

    def __init__(self, count: int):
        if shutil.which("hl-smi") is None:
            raise FileNotFoundError("hl-smi is not on PATH")
        self.count = count

    def sample(self) -> dict[str, float]:
        readings = sorted(parse_hl_smi(run_hl_smi(HL_SMI_FIELDS)), key=lambda r: r.index)
        return hpu_metrics(job_modules(readings, lambda r: r.module_id, self.count))
