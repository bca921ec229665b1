"""What a train run says about itself: name, tags, params and the description shown in the UI."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from ..contract import (
    ACCELERATOR_TAG,
    CAPTION_MATCH_METRIC,
    CPU_LOADER,
    DATA_LOADER_TAG,
    DATASET_FINGERPRINT_TAG,
    DATASET_TAG,
    DECODE_TAG,
    DEVICE_COUNT_TAG,
    DEVICE_MEMORY_TAG,
    DEVICE_NAME_TAG,
    DRIVER_TAG,
    EVAL_FINGERPRINT_TAG,
    FALLBACK_REASON_TAG,
    JOULES_PER_SAMPLE_METRIC,
    MFU_METRIC,
    MODEL_PRESET_TAG,
    PRECISION_TAG,
    RESUMED_TAG,
    RUN_KIND_TAG,
    RUN_KIND_TRAIN,
    RUN_NAME_LIMIT,
    SAMPLES_TO_TARGET_METRIC,
    SOFTWARE_TAG_PREFIX,
    STEPS_TO_TARGET_METRIC,
    TARGET_BEST_METRIC,
    TARGET_TAG,
    TFLOPS_METRIC,
    THROUGHPUT_METRIC,
    THROUGHPUT_PER_DEVICE_METRIC,
    TIME_TO_TARGET_METRIC,
    TIME_TO_TARGET_TRAIN_METRIC,
    TRAIN_LOSS_METRIC,
    WAIT_METRIC,
    WARMUP_TAG,
    decode_class,
)

if TYPE_CHECKING:
    from ..accelerators.base import DeviceInfo
    from ..config import TrainConfig
    from .prepare import Prepared


def run_name(config: TrainConfig, device_kind: str | None = None) -> str:
    """The given name, else the conditions; a long checkpoint path keeps its end, so the name fits the store."""
    if config.run_name:
        return config.run_name
    decode = "device" if config.device_decode else "cpu"
    devices = f" x{config.devices}" if config.devices > 1 else ""
    head, tail = f"{device_kind or config.accel}{devices} ", f" w{config.dataloader_num_workers} decode={decode}"
    room = RUN_NAME_LIMIT - len(head) - len(tail)
    model = config.model if len(config.model) <= room else "…" + config.model[-(room - 1):]
    return head + model + tail


def device_tags(device: DeviceInfo) -> dict[str, str]:
    """The `accelerator.*` and vendor `software.*` tags of what detection found."""
    tags = {
        ACCELERATOR_TAG: device.kind,
        DEVICE_NAME_TAG: device.device_name,
        DEVICE_COUNT_TAG: str(device.count),
        DEVICE_MEMORY_TAG: "" if device.memory_gb is None else f"{device.memory_gb:g}",
        DRIVER_TAG: device.driver or "none",
        **{SOFTWARE_TAG_PREFIX + k: str(v) for k, v in device.software.items()},
        **{k: str(v) for k, v in device.extra_tags.items()},
    }
    return {k: v for k, v in tags.items() if v != ""}


def start_tags(config: TrainConfig, prepared: Prepared) -> dict[str, str]:
    """Tags known before training starts: what ran, on what data, with which loader."""
    tags = {
        **device_tags(prepared.device),
        RUN_KIND_TAG: RUN_KIND_TRAIN,
        DATA_LOADER_TAG: prepared.data_loader,
        DECODE_TAG: decode_class(prepared.data_loader, config.device_decode),
        PRECISION_TAG: prepared.recipe.precision,
        WARMUP_TAG: str(config.throughput_warmup_steps),
        DATASET_TAG: config.dataset,
        DATASET_FINGERPRINT_TAG: prepared.data.fingerprint,
        EVAL_FINGERPRINT_TAG: prepared.data.eval_fingerprint,
        MODEL_PRESET_TAG: config.model,
        **prepared.recipe.tags,
    }
    if config.target:  # before training: an interrupted run still says what it was aiming for
        tags[TARGET_TAG] = config.target
    if prepared.fallback_reason:
        tags[FALLBACK_REASON_TAG] = prepared.fallback_reason
    if config.resume:
        tags[RESUMED_TAG] = "true"
    return tags


def train_params(config: TrainConfig, prepared: Prepared, parameter_count: int) -> dict[str, Any]:
    """Every hyperparameter that shaped the run: asked-for settings, TrainingArguments, model, data, vendor."""
    data = prepared.data
    params = dict(config.to_params())
    params.update({k: v for k, v in prepared.args.to_dict().items() if k not in params})
    params["model"] = config.model
    params["model_config"] = prepared.loaded.model.config.to_dict()
    params["model_parameters"] = parameter_count
    params["data"] = {
        "source": data.source, "train_rows": len(data.train), "validation_rows": len(data.validation),
        "image_column": data.image_column, "caption_column": data.caption_column,
        "fingerprint": data.fingerprint, "eval_fingerprint": data.eval_fingerprint,
    }
    params.update(prepared.recipe.extra_params)
    return params


def target_line(target: str, metrics: dict[str, float]) -> str:
    """`target eval_loss<=2.6: reached at step 30 (480 samples) in 12.3 s, 10.1 s of it training` or its best."""
    if STEPS_TO_TARGET_METRIC not in metrics:
        best = metrics.get(TARGET_BEST_METRIC)
        return f"target {target}: not reached" + (f" (best {best:.4g})" if best is not None else "")
    return (f"target {target}: reached at step {metrics[STEPS_TO_TARGET_METRIC]:.0f} "
            f"({metrics[SAMPLES_TO_TARGET_METRIC]:.0f} samples) in {metrics[TIME_TO_TARGET_METRIC]:.1f} s, "
            f"{metrics[TIME_TO_TARGET_TRAIN_METRIC]:.1f} s of it training")


def _fmt(value: object, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def describe(config: TrainConfig, prepared: Prepared, metrics: dict[str, float], input_bound: str,
             advice: str = "") -> str:
    """Markdown for the run's note: the conditions first, then the headline numbers, then the advice."""
    device = prepared.device
    decode = {CPU_LOADER: "CPU workers"}.get(prepared.data_loader, prepared.data_loader)
    lines = [
        f"**{device.kind}** ({device.device_name}) x{device.count} · model `{config.model}` · "
        f"batch {config.per_device_train_batch_size}/device · {config.dataloader_num_workers} data-loader workers · "
        f"decode: {decode} · {prepared.recipe.precision}"
        + (f" · hf_args `{shlex.join(config.hf_args)}`" if config.hf_args else ""),
        "",
        "| metric | value |",
        "|---|---|",
        f"| train_samples_per_second (first {config.throughput_warmup_steps} steps excluded) | "
        f"{_fmt(metrics.get(THROUGHPUT_METRIC), 1)} |",
        f"| per device | {_fmt(metrics.get(THROUGHPUT_PER_DEVICE_METRIC), 1)} |",
        f"| dataloader_wait_fraction | {_fmt(metrics.get(WAIT_METRIC))} (input bound: {input_bound}) |",
        f"| train_loss | {_fmt(metrics.get(TRAIN_LOSS_METRIC), 4)} |",
        f"| eval_loss | {_fmt(metrics.get('eval_loss'), 4)} |",
        f"| eval_recall_at_1 / at_5 | {_fmt(metrics.get('eval_recall_at_1'))} / "
        f"{_fmt(metrics.get('eval_recall_at_5'))} |",
        f"| eval_caption_match_accuracy | {_fmt(metrics.get(CAPTION_MATCH_METRIC))} |",
        f"| model TFLOP/s (MFU) | {_fmt(metrics.get(TFLOPS_METRIC), 2)} "
        f"({_fmt(metrics.get(MFU_METRIC))}) |",
        f"| joules per sample | {_fmt(metrics.get(JOULES_PER_SAMPLE_METRIC))} |",
    ]
    if config.target:
        lines.insert(1, "")
        lines.insert(2, target_line(config.target, metrics))
    return "\n".join(lines + (["", f"Advice: {advice}"] if advice else []))
