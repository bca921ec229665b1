"""One Gaudi device's reading and its `hpu_{i}_...` names, whichever source (HLML or hl-smi) read it."""

from __future__ import annotations

from dataclasses import dataclass

MB = 1e6  # MLflow's GPU "megabytes" are 10^6 bytes; HPU memory is reported in the same unit


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
