"""What a train run says about itself: name, params, tags and the description shown in the UI."""

from __future__ import annotations

RUN_KIND_TAG = "bridgetower.run_kind"


def run_name(config, device_kind: str | None = None) -> str:
    decode = "device" if config.device_decode else "cpu"
    devices = f" x{config.devices}" if config.devices > 1 else ""
    return config.run_name or f"{device_kind or config.accel}{devices} {config.model} w{config.dataloader_num_workers} decode={decode}"


def train_params(config, training_args, model_config, data, parameter_count: int, extra: dict) -> dict:
    """Every hyperparameter that shaped the run: asked-for settings, TrainingArguments, model, data."""
    params = dict(config.to_params())
    params.update({k: v for k, v in training_args.to_dict().items() if k not in params})
    params["model"] = config.model
    params["model_config"] = model_config.to_dict()
    params["model_parameters"] = parameter_count
    params["data"] = {
        "source": data.source, "train_rows": len(data.train), "validation_rows": len(data.validation),
        "image_column": data.image_column, "caption_column": data.caption_column,
        "fingerprint": data.fingerprint, "eval_fingerprint": data.eval_fingerprint,
    }
    params.update(extra)
    return params


def start_tags(config, device, data_loader: str, precision: str, data) -> dict:
    return {
        RUN_KIND_TAG: "train",
        "data_loader": data_loader,
        "precision": precision,
        "throughput.warmup_steps": str(config.throughput_warmup_steps),
        "dataset": config.dataset,
        "dataset.fingerprint": data.fingerprint,
        "dataset.eval_fingerprint": data.eval_fingerprint,
        "model_preset": config.model,
    }


def _fmt(value, digits=3) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def describe(config, device, data_loader: str, precision: str, metrics: dict, input_bound: str) -> str:
    """Markdown for the run's note: the conditions first, then the headline numbers."""
    decode = {"torch-cpu": "CPU workers"}.get(data_loader, data_loader)
    lines = [
        f"**{device.kind}** ({device.device_name}) x{device.count} · model `{config.model}` · "
        f"batch {config.per_device_train_batch_size}/device · {config.dataloader_num_workers} data-loader workers · "
        f"decode: {decode} · {precision}",
        "",
        "| metric | value |",
        "|---|---|",
        f"| train_samples_per_second (first {config.throughput_warmup_steps} steps excluded) | "
        f"{_fmt(metrics.get('train_samples_per_second'), 1)} |",
        f"| per device | {_fmt(metrics.get('train_samples_per_second_per_device'), 1)} |",
        f"| dataloader_wait_fraction | {_fmt(metrics.get('dataloader_wait_fraction'))} (input bound: {input_bound}) |",
        f"| train_loss | {_fmt(metrics.get('train_loss'), 4)} |",
        f"| eval_loss | {_fmt(metrics.get('eval_loss'), 4)} |",
        f"| eval_recall_at_1 / at_5 | {_fmt(metrics.get('eval_recall_at_1'))} / {_fmt(metrics.get('eval_recall_at_5'))} |",
        f"| eval_caption_match_accuracy | {_fmt(metrics.get('eval_caption_match_accuracy'))} |",
    ]
    return "\n".join(lines)
