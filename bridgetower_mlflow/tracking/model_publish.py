"""After training: save the checkpoint, log the pyfunc model, register a tagged version."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from .model_logging import log_pyfunc_model, register_version, save_checkpoint
from .params import redact_text

log = logging.getLogger(__name__)
VERSION_METRICS = ("train_samples_per_second", "eval_loss", "eval_recall_at_1", "eval_recall_at_5",
                   "eval_caption_match_accuracy")


def version_tags(config, device, prepared, metrics: dict, run_id: str) -> dict[str, str]:
    tags = {"accelerator": device.kind, "accelerator.device_name": device.device_name,
            "accelerator.count": str(device.count), "run_id": run_id, "dataset": config.dataset,
            "dataset.fingerprint": prepared.data.fingerprint,
            "dataset.eval_fingerprint": prepared.data.eval_fingerprint, "model_preset": config.model,
            "data_loader": prepared.data_loader}
    tags.update({k: f"{metrics[k]:.6g}" for k in VERSION_METRICS if metrics.get(k) is not None})
    return tags


def publish_model(config, device, prepared, session, trainer, metrics: dict, step: int) -> str | None:
    """Returns the registered version number (or None when only logged)."""
    from mlflow.tracking import MlflowClient

    folder = Path(prepared.args.output_dir) / "final-model"
    loaded = replace(prepared.loaded, model=trainer.model)
    save_checkpoint(loaded, folder, config.max_seq_length)
    info = log_pyfunc_model(folder, session.run_id, step)
    session.set_tags({"model_uri": info.model_uri})
    if not config.register_as:
        return None
    tags = version_tags(config, device, prepared, metrics, session.run_id)
    description = redact_text(f"{device.kind} x{device.count}, model {config.model}, run {session.run_id}: "
                              f"{metrics.get('train_samples_per_second', 0):.1f} samples/s")
    version = register_version(MlflowClient(), info, config.register_as, tags, description)
    session.set_tags({"registered_model": f"{config.register_as}/{version.version}"})
    return str(version.version)
