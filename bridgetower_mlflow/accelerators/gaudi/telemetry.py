"""Gaudi device facts and telemetry through HLML (PyPI habana-pyhlml, module `pyhlml`) or hl-smi.

Neither source imports habana_frameworks.torch, which must not load before the Gaudi config exists.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from ..base import DeviceSampler

HL_SMI_FIELDS = "index,utilization.aip,memory.used,memory.total,power.draw"


@dataclass(frozen=True)
class HpuReading:
    index: int
    utilization: float
    memory_used_mb: float
    memory_total_mb: float
    power_watts: float


def hpu_metrics(readings: list[HpuReading]) -> dict[str, float]:
    """Readings -> `hpu_{i}_...` names (MLflow's GPU naming with `hpu`; the monitor adds `system/`)."""
    metrics = {}
    for r in readings:
        prefix = f"hpu_{r.index}_"
        metrics[prefix + "utilization_percentage"] = float(r.utilization)
        metrics[prefix + "memory_usage_megabytes"] = float(r.memory_used_mb)
        metrics[prefix + "power_usage_watts"] = float(r.power_watts)
        if r.memory_total_mb:
            metrics[prefix + "memory_usage_percentage"] = round(100.0 * r.memory_used_mb / r.memory_total_mb, 2)
    return metrics


def parse_hl_smi(text: str) -> list[HpuReading]:
    """Parse `hl-smi -Q <HL_SMI_FIELDS> --format csv,noheader,nounits` output."""
    readings = []
    for line in text.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 5 or not parts[0].isdigit():
            raise ValueError(f"unexpected hl-smi line {line!r}; expected {HL_SMI_FIELDS}")
        index, util, used, total, power = parts
        readings.append(HpuReading(int(index), _number(util), _number(used), _number(total), _number(power)))
    return readings


def _number(text: str) -> float:
    return float(text.split()[0]) if text and text.split()[0].replace(".", "", 1).isdigit() else 0.0


def run_hl_smi(fields: str) -> str:
    """hl-smi's CSV answer for `fields` (raises OSError/SubprocessError on failure)."""
    return subprocess.run(["hl-smi", "-Q", fields, "--format", "csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=10, check=True).stdout


class HlmlSampler(DeviceSampler):
    """Utilization, memory and power of the first `count` Gaudi devices via HLML."""

    def __init__(self, count: int):
        import pyhlml

        pyhlml.hlmlInit()
        self._hlml = pyhlml
        total = pyhlml.hlmlDeviceGetCount()
        self._handles = [pyhlml.hlmlDeviceGetHandleByIndex(i) for i in range(min(count, total))]

    def sample(self) -> dict[str, float]:
        hlml, readings = self._hlml, []
        for index, handle in enumerate(self._handles):
            memory = hlml.hlmlDeviceGetMemoryInfo(handle)
            readings.append(HpuReading(
                index=index,
                utilization=float(hlml.hlmlDeviceGetUtilizationRates(handle)),
                memory_used_mb=memory.used / 2**20,
                memory_total_mb=memory.total / 2**20,
                power_watts=hlml.hlmlDeviceGetPowerUsage(handle) / 1000.0,  # HLML reports mW
            ))
        return hpu_metrics(readings)

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
        readings = [r for r in parse_hl_smi(run_hl_smi(HL_SMI_FIELDS)) if r.index < self.count]
        return hpu_metrics(readings)
