"""Runs that look exactly like `train`'s (tags, raw params, metrics), for tests and benchmarks."""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace

from bridgetower_mlflow.compare.references.study import BLOG_NUMBERS
from bridgetower_mlflow.contract import (
    BOTTLENECK_TAG,
    CPU_LOADER,
    DECODE_TAG,
    ENERGY_METRIC,
    EPOCH_START_EXTRA_FRACTION_METRIC,
    ERROR_TAG,
    EVAL_CLOCK_METRIC,
    EVAL_SAMPLES_INTERVAL_METRIC,
    EVAL_TRAIN_SAMPLES_METRIC,
    EVALUATIONS_METRIC,
    HOST_CPU_COUNT_TAG,
    JOULES_PER_SAMPLE_METRIC,
    MFU_METRIC,
    PEAK_MEMORY_METRIC,
    PHASE_FORWARD_BACKWARD,
    PHASES_MERGED_TAG,
    RUN_KIND_TAG,
    SAMPLES_TO_TARGET_METRIC,
    STEPS_TO_TARGET_METRIC,
    SWEEP_CELL_TAG,
    SWEEP_REPEAT_TAG,
    TARGET_BEST_METRIC,
    TARGET_REACHED_TAG,
    TARGET_TAG,
    TFLOPS_METRIC,
    TFLOPS_PER_DEVICE_METRIC,
    THROUGHPUT_METRIC,
    THROUGHPUT_PER_DEVICE_METRIC,
    TIME_TO_TARGET_METRIC,
    TIME_TO_TARGET_TRAIN_METRIC,
    decode_class,
    phase_fraction_metric,
    phase_seconds_metric,
)

FILLER_PARAM_COUNT = 110  # train also logs the full TrainingArguments and model config
LOADER_OF = {"gaudi2": "habana-mediapipe", "gaudi3": "habana-mediapipe", "a100": "nvjpeg",
             "h100": "nvjpeg", "h200": "nvjpeg", "cuda": "nvjpeg"}


@dataclass(frozen=True)
class TrainRunSpec:
    """The few knobs a synthetic train run varies; the rest follows train's defaults."""

    accel: str
    samples_per_second: float
    workers: int = 0
    device_decode: bool = False
    devices: int = 8
    batch: int = 48
    model: str = "BridgeTower/bridgetower-large-itm-mlm-itc"
    precision: str = "bf16"
    warmup_steps: int = 3
    status: str = "FINISHED"
    raw_bool: str = ""  # how `mlflow run` spelled device_decode (e.g. 'True', '1')
    parent_run_id: str = ""
    repeat: int = 1
    loader: str = ""  # the loader that actually ran, when it is not the asked-for one (a fallback)
    tflops: float | None = None  # train_model_tflops_per_second, where train measured FLOPs
    mfu: float | None = None  # train_mfu (a fraction), where the device's peak is known
    joules_per_sample: float | None = None  # where the device has energy counters
    strategy: str = "ddp"
    phases: tuple[tuple[str, float], ...] = ()  # (phase, share of the step): a run with a phase breakdown
    bottleneck: str = ""
    peak_memory_gb: float | None = None
    sweep_cell: str = ""  # the sweep grid cell it repeats (with parent_run_id)
    error: str = ""  # a failed run's reason (the `error` tag train or the sweep writes)
    host_cpu_count: int = 0
    epoch_start_fraction: float | None = None  # train_epoch_start_extra_fraction, where an epoch began in the window
    eval_batch: int = 16  # per_device_eval_batch_size
    seed: int = 42
    # time to quality: a run with a target (canonical spelling) reached it where samples_to_target is given
    target: str = ""
    stop_at_target: bool = True
    samples_to_target: float | None = None
    time_to_target: float | None = None
    eval_samples_interval: float | None = None
    eval_loss: float = 0.11  # the final eval metrics
    recall_at_1: float = 0.4
    recall_at_5: float = 0.8
    best_value: float | None = None  # target_best_value (default: the final value of the target's metric)
    evaluations: tuple[tuple[float, float, float], ...] = ()  # (clock s, train samples, target metric) each eval


def train_run_contents(spec: TrainRunSpec) -> tuple[dict, dict, dict]:
    """(params, tags, metrics) as train logs them."""
    loader = spec.loader or (LOADER_OF.get(spec.accel, CPU_LOADER) if spec.device_decode else CPU_LOADER)
    decode = "device" if spec.device_decode else "cpu"  # what was asked: the run name says it
    params = {f"model.hidden_arg_{i}": str(i) for i in range(FILLER_PARAM_COUNT)}
    params.update({
        "accel": spec.accel, "model": spec.model, "dataset": "jmhessel/newyorker_caption_contest",
        "dataset_config": "matching", "per_device_train_batch_size": str(spec.batch),
        "per_device_eval_batch_size": str(spec.eval_batch), "dataloader_num_workers": str(spec.workers),
        "device_decode": spec.raw_bool or str(spec.device_decode).lower(), "devices": str(spec.devices),
        "max_seq_length": "128", "throughput_warmup_steps": str(spec.warmup_steps),
        "distribution_strategy": spec.strategy, "learning_rate": "1e-05", "seed": str(spec.seed), "max_steps": "-1",
        "num_train_epochs": "5", "precision": "auto", "target": spec.target, "stop_at_target": str(spec.stop_at_target),
        "eval_steps": "0" if spec.eval_samples_interval is None else "8",
    })
    tags = {
        RUN_KIND_TAG: "train", "accelerator": spec.accel, "accelerator.device_name": spec.accel.upper(),
        "accelerator.count": str(spec.devices), "accelerator.memory_gb": "80", "data_loader": loader,
        DECODE_TAG: decode_class(loader, spec.device_decode), "input_bound": "no", "precision": spec.precision,
        "throughput.warmup_steps": str(spec.warmup_steps),
        "software.torch": "2.13.0", "software.transformers": "5.24.0",
        "mlflow.runName": f"{spec.accel} w{spec.workers} decode={decode} r{spec.repeat}",
    }
    if spec.parent_run_id:
        tags["mlflow.parentRunId"] = spec.parent_run_id
    tags.update(_optional_tags(spec))
    metrics = {
        "train_samples_per_second": spec.samples_per_second,
        "train_samples_per_second_per_device": spec.samples_per_second / spec.devices,
        "train_runtime": 300.0, "train_loss": 0.5, "eval_loss": spec.eval_loss, "eval_recall_at_1": spec.recall_at_1,
        "eval_recall_at_5": spec.recall_at_5, "eval_caption_match_accuracy": 0.7, "dataloader_wait_fraction": 0.02,
    }
    metrics.update(_quality_metrics(spec, metrics))
    if spec.target:
        tags.update({TARGET_TAG: spec.target, TARGET_REACHED_TAG: str(spec.samples_to_target is not None).lower()})
    metrics.update(_efficiency_metrics(spec))
    metrics.update(_phase_metrics(spec))
    if spec.peak_memory_gb is not None:
        metrics[PEAK_MEMORY_METRIC] = spec.peak_memory_gb
    if spec.mfu is None:
        tags["mfu.note"] = "no dense peak known for this device"
    if spec.joules_per_sample is None:
        tags["energy.note"] = "no energy counter on this device"
    return params, tags, metrics


def _optional_tags(spec: TrainRunSpec) -> dict:
    """What train (or the sweep) writes only sometimes: phase tags, the sweep cell, an error, host cores."""
    tags = {}
    if any(phase == PHASE_FORWARD_BACKWARD for phase, _ in spec.phases):
        tags[PHASES_MERGED_TAG] = "forward+backward (lazy mode runs them together at mark_step)"
    if spec.bottleneck:
        tags[BOTTLENECK_TAG] = spec.bottleneck
    if spec.sweep_cell:
        tags.update({SWEEP_CELL_TAG: spec.sweep_cell, SWEEP_REPEAT_TAG: str(spec.repeat)})
    if spec.error:
        tags[ERROR_TAG] = spec.error
    if spec.host_cpu_count:
        tags[HOST_CPU_COUNT_TAG] = str(spec.host_cpu_count)
    return tags


def target_metric(spec: TrainRunSpec) -> str:
    """The eval metric a target names (`eval_recall_at_5>=0.2` -> eval_recall_at_5)."""
    return spec.target.split(">")[0].split("<")[0]


def _quality_metrics(spec: TrainRunSpec, finals: dict) -> dict:
    """What train logs of a target (the to-target figures only where it reached it) and of its evaluations."""
    metrics = {}
    if spec.eval_samples_interval is not None:
        metrics[EVAL_SAMPLES_INTERVAL_METRIC] = spec.eval_samples_interval
    if not spec.target:
        return metrics
    metrics[EVALUATIONS_METRIC] = float(len(spec.evaluations) or 1)
    metrics[TARGET_BEST_METRIC] = spec.best_value if spec.best_value is not None else finals[target_metric(spec)]
    if spec.samples_to_target is not None:
        metrics.update({SAMPLES_TO_TARGET_METRIC: spec.samples_to_target,
                        STEPS_TO_TARGET_METRIC: spec.samples_to_target / (spec.batch * spec.devices),
                        TIME_TO_TARGET_METRIC: spec.time_to_target,
                        TIME_TO_TARGET_TRAIN_METRIC: spec.time_to_target * 0.9})
    return metrics


def evaluation_history(spec: TrainRunSpec) -> list[tuple[str, float, int]]:
    """(metric, value, global step) of every evaluation: its clock, its samples and the target's metric."""
    found = []
    for clock, samples, value in spec.evaluations:
        step = int(samples // (spec.batch * spec.devices))
        found += [(EVAL_CLOCK_METRIC, clock, step), (EVAL_TRAIN_SAMPLES_METRIC, samples, step),
                  (target_metric(spec), value, step)]
    return found


def step_seconds(spec: TrainRunSpec) -> float:
    """One optimizer step of the whole job: batch x devices samples at the run's samples/s."""
    return spec.batch * spec.devices / spec.samples_per_second


def _phase_metrics(spec: TrainRunSpec) -> dict:
    metrics = {}
    for phase, share in spec.phases:
        metrics[phase_fraction_metric(phase)] = share
        metrics[phase_seconds_metric(phase)] = share * step_seconds(spec)
    if spec.epoch_start_fraction is not None:
        metrics[EPOCH_START_EXTRA_FRACTION_METRIC] = spec.epoch_start_fraction
    return metrics


def _efficiency_metrics(spec: TrainRunSpec) -> dict:
    metrics = {}
    if spec.tflops is not None:
        metrics[TFLOPS_METRIC] = spec.tflops
        metrics[TFLOPS_PER_DEVICE_METRIC] = spec.tflops / spec.devices
    if spec.mfu is not None:
        metrics[MFU_METRIC] = spec.mfu
    if spec.joules_per_sample is not None:
        metrics[JOULES_PER_SAMPLE_METRIC] = spec.joules_per_sample
        metrics[ENERGY_METRIC] = spec.joules_per_sample * spec.samples_per_second * 300.0
    return metrics


def fake_run(spec: TrainRunSpec, run_id: str) -> SimpleNamespace:
    """A finished run object shaped like MLflow's (info + data), without a store."""
    params, tags, metrics = train_run_contents(spec)
    info = SimpleNamespace(run_id=run_id, run_name=tags["mlflow.runName"], experiment_id="1", status="FINISHED")
    return SimpleNamespace(info=info, data=SimpleNamespace(params=params, tags=tags, metrics=metrics))


def log_train_run(client, experiment_id: str, spec: TrainRunSpec) -> str:
    """Create one finished (or failed/running) train-like run; returns its id."""
    from mlflow.entities import Metric, Param, RunTag

    params, tags, metrics = train_run_contents(spec)
    run = client.create_run(experiment_id, tags={"mlflow.runName": tags["mlflow.runName"]})
    run_id = run.info.run_id
    now = int(time.time() * 1000)
    history = evaluation_history(spec)
    last = max((step for *_, step in history), default=0)  # the final metrics sit at the last global step
    finished = spec.status == "FINISHED"
    client.log_batch(
        run_id,
        metrics=[Metric(k, v, now, last) for k, v in metrics.items()] if finished else [],
        params=[Param(k, v) for k, v in params.items()],
        tags=[RunTag(k, v) for k, v in tags.items()],
    )
    if finished and history:
        client.log_batch(run_id, metrics=[Metric(k, v, now, step) for k, v, step in history])
    if spec.status != "RUNNING":
        client.set_terminated(run_id, spec.status)
    return run_id


STUDY_RUNS = tuple((accel, workers, decode == "device", value)
                   for accel, rows in BLOG_NUMBERS.items() for workers, decode, _, value in rows)


def log_study_runs(client, experiment_id: str) -> list[str]:
    """The blog's ten numbers as ten train runs (8 devices, batch 48)."""
    return [
        log_train_run(client, experiment_id, TrainRunSpec(accel, value, workers, decode))
        for accel, workers, decode, value in STUDY_RUNS
    ]


def log_scaled_copy(client, experiment_id: str, run, factor: float) -> str:
    """A copy of a finished train run (params, tags, metrics) whose throughput is `factor` x the original's.

    For gate tests: the same configuration as a real run, measured slower or faster.
    """
    from mlflow.entities import Metric, Param, RunTag

    data = run.data
    metrics = dict(data.metrics)
    for name in (THROUGHPUT_METRIC, THROUGHPUT_PER_DEVICE_METRIC):
        if name in metrics:
            metrics[name] *= factor
    tags = {k: v for k, v in data.tags.items() if not k.startswith("mlflow.")}
    name = f"{data.tags.get('mlflow.runName', 'run')} x{factor:g}"
    copy = client.create_run(experiment_id, tags={"mlflow.runName": name}).info.run_id
    now = int(time.time() * 1000)
    params = [Param(k, v) for k, v in data.params.items()]
    for start in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
        client.log_batch(copy, params=params[start:start + 100])
    client.log_batch(copy, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])
    client.set_terminated(copy, "FINISHED")
    return copy
