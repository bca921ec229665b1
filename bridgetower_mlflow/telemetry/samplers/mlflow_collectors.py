"""MLflow's own system-metric collectors (CPU, memory, disk, network, GPU), polled by the project's monitor.

MLflow's names and units stay as they are; what changes is the thread: MLflow's monitor ends for good
at the first failed `get_run`, the project's monitor ships every sample through the run buffer.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class MlflowCollector:
    """One collector: a sample is one collect_metrics, its aggregate, then a clear."""

    def __init__(self, collector):
        self.collector = collector

    def sample(self) -> dict[str, float]:
        self.collector.collect_metrics()
        values = dict(self.collector.aggregate_metrics())
        self.collector.clear_metrics()
        return values

    def close(self) -> None:
        pass


def mlflow_collectors() -> list[MlflowCollector]:
    """CPU, disk and network always; NVIDIA (or ROCm) GPUs where MLflow can read them."""
    from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
    from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
    from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

    collectors = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]
    for module, name in (("gpu_monitor", "GPUMonitor"), ("rocm_monitor", "ROCMMonitor")):
        try:
            monitor = __import__(f"mlflow.system_metrics.metrics.{module}", fromlist=[name])
            collectors.append(getattr(monitor, name)())
            break
        except Exception as exc:  # noqa: BLE001 - no such GPU here (MLflow raises ImportError or RuntimeError)
            log.debug("MLflow %s off: %s", name, exc)
    return [MlflowCollector(c) for c in collectors]
