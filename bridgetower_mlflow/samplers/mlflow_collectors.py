"""MLflow's own system-metric collectors (CPU, memory, disk, network, GPU), polled by the project's monitor.

MLflow's names and units stay as they are; what changes is the thread: MLflow's monitor ends for good
at the first failed `get_run`, the project's monitor ships every sample through the run buffer. And
the GPUs: MLflow's GPUMonitor reads every GPU of the host; here it reads the job's only, each still
named by its NVML index (a shared host's other jobs are neither logged nor averaged into the advice).
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)
GPU_NAME = re.compile(r"^gpu_(\d+)_")


class MlflowCollector:
    """One collector: a sample is one collect_metrics, its aggregate, then a clear."""

    def __init__(self, collector):
        self.collector = collector

    def start(self) -> None:
        pass

    def sample(self) -> dict[str, float]:
        self.collector.collect_metrics()
        values = dict(self.collector.aggregate_metrics())
        self.collector.clear_metrics()
        return values

    def stop(self) -> None:
        pass


class JobGpuCollector(MlflowCollector):
    """MLflow's GPUMonitor over `handles` [(NVML index, handle)]: its gpu_{position}_ names become gpu_{index}_."""

    def __init__(self, monitor, handles):
        super().__init__(monitor)
        monitor.gpu_handles = [handle for _, handle in handles]
        self.indices = {str(position): str(index) for position, (index, _) in enumerate(handles)}

    def sample(self) -> dict[str, float]:
        return {GPU_NAME.sub(self._renamed, name, count=1): value for name, value in super().sample().items()}

    def _renamed(self, match) -> str:
        return f"gpu_{self.indices[match.group(1)]}_"


def mlflow_collectors(job_gpus: int) -> list[MlflowCollector]:
    """CPU, disk and network always; the job's `job_gpus` NVIDIA GPUs (0: none) where MLflow can read them."""
    from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
    from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
    from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

    collectors = [MlflowCollector(c) for c in (CPUMonitor(), DiskMonitor(), NetworkMonitor())]
    gpu = _gpu_collector(job_gpus) if job_gpus > 0 else None
    return collectors + ([gpu] if gpu else [])


def host_collectors() -> list[MlflowCollector]:
    """The host's CPU and memory only (what a node other than rank 0's adds to the run)."""
    from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor

    return [MlflowCollector(CPUMonitor())]


def _gpu_collector(job_gpus: int) -> MlflowCollector | None:
    reasons = []
    try:
        from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor

        from .job_devices import job_gpu_handles

        monitor = GPUMonitor()  # raises ImportError without pynvml, RuntimeError when nvmlInit fails
        return JobGpuCollector(monitor, job_gpu_handles(job_gpus))
    except Exception as exc:  # noqa: BLE001 - no NVIDIA GPU here: try ROCm, then go on without
        reasons.append(f"GPUMonitor: {exc}")
    try:
        from mlflow.system_metrics.metrics.rocm_monitor import ROCMMonitor

        return MlflowCollector(ROCMMonitor())  # every AMD GPU of the host: no per-job choice there
    except Exception as exc:  # noqa: BLE001 - no ROCm either
        reasons.append(f"ROCMMonitor: {exc}")
    log.warning("GPU system metrics off (%s)", "; ".join(reasons))
    return None
