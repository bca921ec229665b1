"""Everything checked before a run is started (configuration fails fast): model, data, recipe, loader."""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..accelerators.base import DecodeRequest
from ..contract import CPU_LOADER
from ..errors import ConfigError, DeviceDecodeUnavailable
from .arguments import recipe_settings

if TYPE_CHECKING:
    from transformers import TrainingArguments

    from ..accelerators.base import Accelerator, DeviceInfo, DeviceLoader, TrainingRecipe
    from ..config import TrainConfig
    from ..data.loading import PreparedData
    from ..launch.ranks import RankInfo
    from ..model.load import LoadedModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """The run's parts, ready to train: adapter and device, model, data, recipe and its arguments.

    Frozen: a phase that changes it makes a new one (dataclasses.replace, in_run_folder)."""

    adapter: Accelerator
    device: DeviceInfo
    loaded: LoadedModel
    data: PreparedData
    recipe: TrainingRecipe
    args: TrainingArguments  # the recipe's class: TrainingArguments or GaudiTrainingArguments
    device_loader: DeviceLoader | None = None  # when decoding on the device
    data_loader: str = CPU_LOADER
    fallback_reason: str | None = None
    total_steps: int = 0

    def in_run_folder(self, folder: Path) -> Prepared:
        """These parts writing into the run's own folder: a copy of `args` with that output_dir (the
        TrainingArguments built here are not rebuilt: their __post_init__ sets up devices and the environment)."""
        args = copy.copy(self.args)
        args.output_dir = str(folder)
        return dataclasses.replace(self, args=args)


def prepare(config: TrainConfig, adapter: Accelerator, device: DeviceInfo, ranks: RankInfo) -> Prepared:
    """Load the model and data and build the recipe; raises ConfigError/DataError before any run exists."""
    from ..data.cpu_images import cpu_loader_name
    from ..data.loading import prepare_data
    from ..model.load import load_model

    recipe = adapter.recipe(device, recipe_settings(config, ranks.job_size(config.devices)))
    args = recipe.build_arguments()  # first: a flag hf_args names that the class lacks is refused before any work
    if config.max_steps > 0:  # known before the model and data load (an epoch run's count is known after)
        _check_warmup(config.throughput_warmup_steps, config.max_steps)
    loaded = load_model(config.model, config.max_seq_length, config.seed)
    data = prepare_data(config, loaded.tokenizer, loaded.image)
    prepared = Prepared(adapter, device, loaded, data, recipe, args, data_loader=cpu_loader_name(config.image_backend))
    prepared = dataclasses.replace(prepared, total_steps=total_steps(config, prepared.args, len(data.train),
                                                                     ranks.world_size))
    if config.device_decode:
        prepared = _with_device_loader(config, prepared, ranks)
    _check_warmup(config.throughput_warmup_steps, prepared.total_steps)
    return prepared


def _check_warmup(warmup: int, total_steps: int) -> None:
    if warmup >= total_steps:
        raise ConfigError("throughput_warmup_steps", warmup, f"allowed: fewer than the run's {total_steps} training "
                                                             "steps (raise max_steps or epochs)")


def _with_device_loader(config: TrainConfig, prepared: Prepared, ranks: RankInfo) -> Prepared:
    """`prepared` decoding on the device, or (allowed by allow_loader_fallback) on the CPU with the reason."""
    request = DecodeRequest(
        dataset=prepared.data.train, batch_size=prepared.args.per_device_train_batch_size, seed=config.seed,
        image=prepared.loaded.image, num_workers=config.dataloader_num_workers, device=prepared.device,
        rank=ranks.rank, world_size=ranks.world_size, local_rank=ranks.local_rank,
        drop_last=prepared.args.dataloader_drop_last)
    try:
        loader = prepared.adapter.device_decode_loader(request)
    except DeviceDecodeUnavailable as exc:
        if not config.allow_loader_fallback:
            raise ConfigError("device_decode", "true", f"{exc}; set allow_loader_fallback=true to train "
                              "with the CPU loader instead") from None
        log.warning("device decode unavailable (%s): falling back to the CPU loader", exc)
        return dataclasses.replace(prepared, fallback_reason=str(exc))
    return dataclasses.replace(prepared, device_loader=loader, data_loader=loader.name)


def total_steps(config: TrainConfig, args: TrainingArguments, rows: int, world_size: int) -> int:
    """Optimizer steps the run will take (max_steps, or epochs of full global batches).

    Whatever max_steps says, a global batch the training split cannot fill is refused: with drop_last
    the Trainer would take no step at all and end the run with a loss of 0.
    """
    per_rank = args.per_device_train_batch_size * args.gradient_accumulation_steps
    if rows < per_rank * world_size:
        raise ConfigError("per_device_train_batch_size", args.per_device_train_batch_size,
                          f"allowed: at most {rows // (max(1, world_size) * args.gradient_accumulation_steps)} "
                          f"(the training split has {rows} rows)")
    if config.max_steps > 0:
        return config.max_steps
    return int(math.ceil((rows // (per_rank * world_size)) * config.num_train_epochs))
