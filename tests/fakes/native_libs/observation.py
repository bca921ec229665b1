"""Rank 0's real Observation (system monitor, energy window, advice) for a few samples, over whatever
NVML/HLML stub the test configured; only the run around it (model, trainer, MLflow) is absent."""

from __future__ import annotations

import time
from types import SimpleNamespace

from bridgetower_mlflow.config import TrainConfig
from bridgetower_mlflow.contract import WAIT_METRIC


class RecordingSink:
    """The run buffer's log_metric: keeps every value of every series."""

    def __init__(self):
        self.series: dict[str, list[float]] = {}

    def log_metric(self, key, value, step=None, timestamp=None):
        self.series.setdefault(key, []).append(value)


def observe(monkeypatch, adapter, device, ranks, during=None, samples: int = 3):
    """(series logged, metrics, tags) of an Observation that saw `samples` samples; `during()` runs inside
    the energy window (to move the counters)."""
    from bridgetower_mlflow.environment import system_metrics_settings
    from bridgetower_mlflow.train import observe as observe_module
    from bridgetower_mlflow.train.findings import findings

    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.05")  # MLflow's own knob, as users set it
    if ranks.world_size > 1:  # this process is rank 0 of a job whose other ranks do not run: no process group
        monkeypatch.setattr(observe_module, "all_gather_objects", lambda obj, ranks: [obj])
    sink = RecordingSink()
    prepared = SimpleNamespace(adapter=adapter, device=device, device_loader=None, loaded=None,
                               recipe=SimpleNamespace(precision="bf16"),
                               args=SimpleNamespace(dataloader_persistent_workers=False))
    observation = observe_module.Observation(prepared, SimpleNamespace(buffer=sink, last_steps={}), ranks,
                                             system_metrics_settings())  # read as train's entry reads it
    observation.window.start()
    if during:
        during()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(sink.series.get("system/main_process_cpu_percentage", ())) < samples:
        time.sleep(0.05)
    observation.window.stop()
    observed = observation.stop()
    config = TrainConfig(max_seq_length=40, dataloader_num_workers=2)
    metrics, tags = findings(config, prepared, {WAIT_METRIC: 0.02}, observed)
    return sink.series, metrics, tags
