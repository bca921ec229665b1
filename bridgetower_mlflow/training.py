"""The whole flow: config -> adapter -> data -> model -> trainer -> tracked result."""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from .accelerators.base import DeviceDecodeUnavailable
from .accelerators.registry import get_accelerator
from .errors import ConfigError
from .launch import RankInfo, barrier, gather_to_main, launch_ranks, needs_launch

log = logging.getLogger(__name__)
FLUSH_TIMEOUT = float(os.environ.get("BRIDGETOWER_FLUSH_TIMEOUT", "120"))


@dataclass
class Prepared:
    """Everything checked before a run is started (configuration fails fast)."""

    loaded: object
    data: object
    args: object
    device_loader: object
    data_loader: str
    fallback_reason: str | None
    total_steps: int


@dataclass
class TrainResult:
    run_id: str | None
    metrics: dict = field(default_factory=dict)
    model_version: str | None = None
    spill_left: int = 0


def train(config) -> TrainResult:
    """One fully tracked fine-tuning run (or its launcher when devices > 1)."""
    ranks = RankInfo.from_env()
    adapter = get_accelerator(config.accel)
    device = adapter.detect(config.devices if ranks.world_size == 1 else ranks.world_size)
    if needs_launch(config.devices, ranks):
        from .training_launcher import launch_and_wait

        return launch_and_wait(config, adapter, device, launch_ranks)
    prepared = prepare(config, adapter, ranks)
    from .training_run import fit_and_record

    return fit_and_record(config, adapter, device, prepared, ranks)


def prepare(config, adapter, ranks: RankInfo) -> Prepared:
    from .data.collate import collate_batch
    from .data.loading import prepare_data
    from .modeling import load_model
    from .training_args import common_training_kwargs, hf_args_overrides

    loaded = load_model(config.model, config.max_seq_length, config.seed)
    data = prepare_data(config, loaded.tokenizer, loaded.image_size)
    overrides = hf_args_overrides(adapter.training_arguments_class(), config.hf_args)
    args = adapter.training_arguments({**common_training_kwargs(config, config.output_dir), **overrides}, config)
    device_loader, data_loader, reason = None, "torch-cpu", None
    if config.device_decode:
        try:
            device_loader = adapter.device_decode_loader(
                data.train, batch_size=args.per_device_train_batch_size, seed=config.seed,
                image_size=loaded.image_size, mean=loaded.image_mean, std=loaded.image_std,
                num_workers=config.dataloader_num_workers, collate=collate_batch, rank=ranks.rank,
                world_size=ranks.world_size)
            data_loader = device_loader.name
        except DeviceDecodeUnavailable as exc:
            if not config.allow_loader_fallback:
                raise ConfigError("device_decode", "true", f"{exc}; set allow_loader_fallback=true to train "
                                  "with the CPU loader instead") from None
            log.warning("device decode unavailable (%s): falling back to the CPU loader", exc)
            reason = str(exc)
    total = _total_steps(config, args, len(data.train), ranks.world_size)
    if config.throughput_warmup_steps >= total:
        raise ConfigError("throughput_warmup_steps", config.throughput_warmup_steps,
                          f"allowed: fewer than the run's {total} training steps (raise max_steps or epochs)")
    return Prepared(loaded, data, args, device_loader, data_loader, reason, total)


def _total_steps(config, args, rows: int, world_size: int) -> int:
    if config.max_steps > 0:
        return config.max_steps
    per_step = args.per_device_train_batch_size * world_size * args.gradient_accumulation_steps
    if rows < per_step:
        raise ConfigError("per_device_train_batch_size", args.per_device_train_batch_size,
                          f"allowed: at most {rows // max(1, world_size)} (the training split has {rows} rows)")
    return int(math.ceil((rows // per_step) * config.num_train_epochs))


def remember_run(output_dir: str, run_id: str) -> None:
    """`resume=true` finds the run of the last train started in this output folder."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "last_run.json").write_text(json.dumps({"run_id": run_id}))


def last_run(output_dir: str) -> str | None:
    path = Path(output_dir) / "last_run.json"
    return json.loads(path.read_text())["run_id"] if path.exists() else None


def sync_ranks(ranks: RankInfo) -> None:
    barrier(ranks)


def share_from_main(value, ranks: RankInfo):
    """Rank 0's value on every rank."""
    return gather_to_main(value, ranks)[0]
