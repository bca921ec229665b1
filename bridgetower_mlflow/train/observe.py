"""Rank 0's observation of its run: the system monitor, the energy window, and what they add at the end
(FLOPs, TFLOP/s, MFU, energy, the advice line)."""

from __future__ import annotations

import dataclasses
import logging
import os

from ..contract import ADVICE_TAG, WAIT_METRIC
from .advice import RunFacts, advice
from .efficiency import energy_metrics, flops_metrics

log = logging.getLogger(__name__)
SAMPLING_INTERVAL = float(os.environ.get("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL") or 2.0)  # MLflow's own knob
DEVICE_UTILIZATION = r"(gpu|hpu)_\d+_utilization_percentage"


class Observation:
    """Started before training on rank 0 (nothing elsewhere); `findings` once the run's metrics are known."""

    def __init__(self, prepared, session, ranks):
        self.prepared, self.whole_job = prepared, ranks.world_size == ranks.local_world_size
        self.monitor = self.window = None
        if session is not None:
            self.monitor = _start_monitor(prepared, session, ranks)
            self._start_window()

    def _start_window(self) -> None:
        from ..telemetry.energy import EnergyWindow

        samplers = self.monitor.samplers if self.monitor else []
        self.window = EnergyWindow([s for s in samplers if hasattr(s, "energy_joules")])

    def stop(self) -> None:
        if self.monitor:
            self.monitor.stop()

    def findings(self, config, metrics: dict) -> tuple[dict, dict]:
        """(metrics, tags) to add: efficiency, energy, advice (with the notes for what is unknown)."""
        prepared = self.prepared
        flops, flops_tags = flops_metrics(prepared, metrics, prepared.device.count, config.max_seq_length)
        energy, energy_tags = energy_metrics(self.window, metrics, self.whole_job)
        facts = RunFacts(
            wait_fraction=metrics.get(WAIT_METRIC, 0.0), workers=config.dataloader_num_workers,
            workers_cpu_percent=self.monitor.mean("dataloader_workers_cpu_percentage") if self.monitor else None,
            host_cores=os.cpu_count() or 1,
            device_utilization=self.monitor.mean(DEVICE_UTILIZATION) if self.monitor else None,
            device_decode_possible=bool(prepared.adapter.device_loader) and prepared.device_loader is None)
        return {**flops, **energy}, {**flops_tags, **energy_tags, ADVICE_TAG: advice(facts)}


def _start_monitor(prepared, session, ranks):
    """The monitor of this host's share of the job: its devices only, not every device the host has."""
    from ..accelerators.registry import family
    from ..telemetry.monitor import SystemMonitor
    from ..telemetry.samplers.host_cpu import HostCpuSampler
    from ..telemetry.samplers.mlflow_collectors import mlflow_collectors

    try:
        here = dataclasses.replace(prepared.device, count=ranks.devices_here(prepared.device.count))
        gpus = here.count if family(here.kind) == "cuda" else 0
        samplers = [HostCpuSampler(), *mlflow_collectors(gpus), *prepared.adapter.device_samplers(here)]
        return SystemMonitor(session.buffer, samplers, SAMPLING_INTERVAL, session.last_steps).start()
    except Exception as exc:  # noqa: BLE001 - telemetry fails soft
        log.warning("system metrics disabled: %s", exc)
        return None
