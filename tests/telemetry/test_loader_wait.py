"""dataloader_wait_fraction tells the truth: a slow loader reads high, a fast one low, and the
measurement adds no device synchronization (host clocks around `next()` only).

The real trainer (train.prepare.prepare + train.trainer.build_trainer, tiny preset, CPU) is driven
directly with its train dataset swapped for a slow one or an in-memory one; no MLflow run.
"""

import ast
import inspect
import time

import pytest
import torch

from bridgetower_mlflow.accelerators.registry import get_accelerator
from bridgetower_mlflow.config import build_train_config
from bridgetower_mlflow.contract import input_bound_label
from bridgetower_mlflow.launch.ranks import RankInfo
from bridgetower_mlflow.telemetry.sinks import NullSink
from bridgetower_mlflow.telemetry.steps import loader_wait, throughput
from bridgetower_mlflow.telemetry.steps.loader_wait import TimedLoader
from bridgetower_mlflow.telemetry.steps.throughput import ThroughputCallback, combine_ranks
from bridgetower_mlflow.telemetry.steps.trainer_meter import TrainerMeter
from bridgetower_mlflow.train.prepare import prepare
from bridgetower_mlflow.train.trainer import build_trainer

# CPU seconds burnt per batch: ~2-4x a tiny-model step of batch 4. CPU work rather than a sleep,
# so the share stays put when other jobs slow this machine down (both sides slow down alike).
CPU_PER_BATCH = 0.4


class SlowTransform:
    """The real image transform plus a fixed amount of CPU work per batch: a loader slower than the model."""

    def __init__(self, transform, cpu_seconds: float):
        self.transform, self.cpu_seconds = transform, cpu_seconds

    def __call__(self, batch):
        started = time.thread_time()
        while time.thread_time() - started < self.cpu_seconds:
            pass
        return self.transform(batch)


class InMemory(torch.utils.data.Dataset):
    """Rows decoded once up front: fetching a batch costs next to nothing."""

    def __init__(self, dataset):
        self.rows = [dataset[i] for i in range(len(dataset))]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        return self.rows[index]


@pytest.fixture(scope="module")
def prepared_run(cache_dir, tmp_path_factory):
    # one torch thread: with two, a busy second core turns OpenMP barriers into multi-second steps
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield _prepare(tmp_path_factory)
    torch.set_num_threads(threads)


def _prepare(tmp_path_factory):
    config = build_train_config(model="tiny", max_steps=6, logging_steps=1, per_device_train_batch_size=4,
                                dataloader_num_workers=0, throughput_warmup_steps=2, log_model=False,
                                output_dir=str(tmp_path_factory.mktemp("out")))
    adapter = get_accelerator("cpu")
    return config, adapter, prepare(config, adapter, adapter.detect(1, 1), RankInfo(0, 0, 1))


def train_and_measure(prepared_run, train_dataset) -> dict:
    config, adapter, prepared = prepared_run
    original = prepared.data.train
    prepared.data.train = train_dataset
    try:
        trainer, meter = build_trainer(config, prepared, NullSink())
        trainer.train()
    finally:
        prepared.data.train = original
    return combine_ranks([meter.result(config.per_device_train_batch_size)])


def test_slow_loader_reports_high_wait(prepared_run):
    train = prepared_run[2].data.train
    transform = train.format["format_kwargs"]["transform"]  # the real ImageTransform
    metrics = train_and_measure(prepared_run, train.with_transform(SlowTransform(transform, CPU_PER_BATCH)))
    # the injected time is all in the measured wait (a batch per measured step, fetched in-process)
    assert metrics["dataloader_wait_fraction"] * metrics["train_steady_state_seconds"] \
        >= metrics["train_measured_steps"] * CPU_PER_BATCH, metrics
    assert metrics["dataloader_wait_fraction"] >= 0.2, metrics
    assert input_bound_label(metrics["dataloader_wait_fraction"]) == "high"


def test_in_memory_loader_reports_low_wait(prepared_run):
    metrics = train_and_measure(prepared_run, InMemory(prepared_run[2].data.train))
    assert metrics["dataloader_wait_fraction"] < 0.05, metrics
    assert input_bound_label(metrics["dataloader_wait_fraction"]) == "no"


SYNC_CALLS = {"synchronize", "item", "cpu", "tolist", "numpy", "mark_step", "wait_stream", "to"}


@pytest.mark.parametrize("module", [loader_wait, throughput], ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_measurement_code_calls_nothing_that_syncs_a_device(module):
    calls = {node.func.attr for node in ast.walk(ast.parse(inspect.getsource(module)))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
    assert not calls & SYNC_CALLS, calls & SYNC_CALLS


def test_timing_a_step_reads_no_tensor(monkeypatch):
    """At run time too: iterating the TimedLoader and the callback's step hooks touch no tensor value."""
    touched = []
    for name in ("item", "cpu", "tolist", "numpy", "__bool__", "__float__"):
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name,
                            lambda self, *a, _n=name, _o=original, **k: touched.append(_n) or _o(self, *a, **k))
    batches = [{"pixel_values": torch.zeros(2, 4, 4, 3, dtype=torch.uint8)} for _ in range(5)]
    loader, attached = TimedLoader(batches, 5), TrainerMeter()
    attached.attach(loader)
    meter = ThroughputCallback(_Sink(), attached, 2, 1, 1)
    state = type("State", (), {"global_step": 0})()
    meter.on_train_begin(None, state, None)
    for _batch in loader:
        state.global_step += 1
        meter.on_step_end(None, state, None)
    assert touched == [] and loader.batches == 5


class _Sink:
    def log_metric(self, *args, **kwargs):
        pass
