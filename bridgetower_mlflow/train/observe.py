"""Rank 0's observation of its run: the system monitor and the energy window while it trains, then what they
add at the end (FLOPs, TFLOP/s, MFU, energy, the advice line) as a pure function of what was measured."""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass

from ..contract import ADVICE_TAG, WAIT_METRIC
from .advice import RunFacts, advice
from .efficiency import energy_metrics, flops_metrics

log = logging.getLogger(__name__)
SAMPLING_INTERVAL = float(os.environ.get("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL") or 2.0)  # MLflow's own knob
DEVICE_UTILIZATION = r"(gpu|hpu)_\d+_utilization_percentage"


@dataclass(frozen=True)
class Observed:
    """What rank 0's telemetry saw, read once when training ends: plain numbers, so findings are pure."""

    workers_cpu_percent: float | None = None  # the data-loader workers, summed (100 = one core)
    device_utilization: float | None = None  # mean percent, where the device reports it
    energy_joules: float | None = None  # over the throughput window
    energy_note: str = "no energy counter was read (system metrics were off)"
    whole_job: bool = True  # this host ran every rank


class Observation:
    """Started before training on rank 0 (nothing elsewhere); `stop` returns what it observed."""

    def __init__(self, prepared, session, ranks):
        self.whole_job = ranks.world_size == ranks.local_world_size
        self.monitor = self.window = None
        if session is not None:
            self.monitor = _start_monitor(prepared, session, ranks)
            self._start_window()

    def _start_window(self) -> None:
        from ..telemetry.energy import EnergyWindow

        samplers = self.monitor.samplers if self.monitor else []
        self.window = EnergyWindow([s for s in samplers if hasattr(s, "energy_joules")])

    def stop(self) -> Observed:
        if self.monitor:
            self.monitor.stop()
        found = Observed(whole_job=self.whole_job)
        if self.monitor:
            workers = self.monitor.mean("dataloader_workers_cpu_percentage")
            found = dataclasses.replace(found, workers_cpu_percent=workers,
                                        device_utilization=self.monitor.mean(DEVICE_UTILIZATION))
        if self.window:
            joules = self.window.joules()  # sets the window's note when it has none
            found = dataclasses.replace(found, energy_joules=joules, energy_note=self.window.note)
        return found


def findings(config, prepared, metrics: dict, observed: Observed) -> tuple[dict, dict]:
    """(metrics, tags) to add: efficiency, energy, advice (with the notes for what is unknown)."""
    flops, flops_tags = flops_metrics(prepared, metrics, prepared.device.count, config.max_seq_length)
    energy, energy_tags = energy_metrics(observed.energy_joules, observed.energy_note, metrics, observed.whole_job)
    facts = RunFacts(
        wait_fraction=metrics.get(WAIT_METRIC, 0.0), workers=config.dataloader_num_workers,
        workers_cpu_percent=observed.workers_cpu_percent, host_cores=os.cpu_count() or 1,
        device_utilization=observed.device_utilization,
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
