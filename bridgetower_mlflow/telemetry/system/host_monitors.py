"""The system monitors a run starts on a host, and the energy window over the counters among their samplers.

Rank 0's monitor samples its host's CPU, memory, disk and network (MLflow's collectors), the training processes
with their data-loader workers, and the job's devices on this host; another node's monitor, its host's CPU and
memory and its ranks' workers. Telemetry fails soft: a monitor that cannot start is a warning and no series."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...samplers.protocol import EnergyCounter

if TYPE_CHECKING:
    from ...accelerators.base import Accelerator, DeviceInfo
    from ...samplers.protocol import Sampler
    from ..sinks import MetricSink
    from .energy import EnergyWindow
    from .monitor import SeriesNames, SystemMonitor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Schedule:
    """When a monitor samples: every `interval_s` seconds (MLflow's setting, read at train's entry), its first
    sample at `first_step` (after the steps its run's series already have)."""

    first_step: int
    interval_s: float


def start_device_monitor(sink: MetricSink, adapter: Accelerator, here: DeviceInfo, pids: Sequence[int],
                         names: SeriesNames, schedule: Schedule) -> SystemMonitor | None:
    """Rank 0's monitor of its host's share of the job (`here`: the job's devices on this host, not every device
    the host has), or None where it cannot start."""
    from ...samplers.host_cpu import HostCpuSampler
    from ...samplers.mlflow_collectors import mlflow_collectors

    def samplers() -> list[Sampler]:
        return [HostCpuSampler(*pids), *mlflow_collectors(adapter.mlflow_gpu_count(here)),
                *adapter.device_samplers(here)]

    return _start(sink, samplers, names, schedule, "system metrics disabled: %s")


def start_node_monitor(sink: MetricSink, node: int, pids: Sequence[int], schedule: Schedule) -> SystemMonitor | None:
    """Another node's monitor: its host's CPU and memory and its ranks' workers, as system/node_<n>/..."""
    from ...samplers.host_cpu import HostCpuSampler
    from ...samplers.mlflow_collectors import host_collectors
    from .monitor import SeriesNames

    def samplers() -> list[Sampler]:
        return [HostCpuSampler(*pids), *host_collectors()]

    return _start(sink, samplers, SeriesNames(node, main=False), schedule,
                  f"system metrics of node {node} disabled: %s")


def _start(sink: MetricSink, samplers: Callable[[], list[Sampler]], names: SeriesNames, schedule: Schedule,
           failed: str) -> SystemMonitor | None:
    from .monitor import SystemMonitor

    try:
        return SystemMonitor(sink, samplers(), schedule.interval_s, names=names,
                             first_step=schedule.first_step).start()
    except Exception as exc:  # noqa: BLE001 - telemetry fails soft
        log.warning(failed, exc)
        return None


def energy_window(monitor: SystemMonitor | None) -> EnergyWindow:
    """The window over the monitor's samplers that are energy counters (none: the window says why)."""
    from .energy import EnergyWindow

    samplers = monitor.samplers if monitor else []
    return EnergyWindow([sampler for sampler in samplers if isinstance(sampler, EnergyCounter)])
