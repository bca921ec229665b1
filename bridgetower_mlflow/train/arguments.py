"""TrainingArguments every accelerator shares, and what of the config the adapters see."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..accelerators.base import RecipeSettings

if TYPE_CHECKING:
    from ..config import TrainConfig


def common_training_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The study's settings, identical on every accelerator (the adapters add their own)."""
    return {
        "output_dir": config.output_dir,
        "per_device_train_batch_size": config.per_device_train_batch_size,
        "per_device_eval_batch_size": config.per_device_eval_batch_size,
        "learning_rate": config.learning_rate,
        "num_train_epochs": config.num_train_epochs,
        "max_steps": config.max_steps,
        "seed": config.seed,
        "dataloader_num_workers": config.dataloader_num_workers,
        "dataloader_drop_last": True,  # every measured step carries a full contrastive batch
        "logging_steps": config.logging_steps,
        "logging_strategy": "steps",
        "save_strategy": "steps" if config.save_steps else "no",
        "save_steps": config.save_steps or 500,
        "save_total_limit": 2 if config.save_steps else None,
        # every eval_steps optimizer steps, logged at its step (quality.QualityCallback adds one at the last step)
        "eval_strategy": "steps" if config.eval_steps else "no",
        "eval_steps": config.eval_steps or None,
        "report_to": "none",  # our callback owns what is logged; transformers' MLflowCallback stays off
        "remove_unused_columns": False,
        "adam_epsilon": 1e-6,  # optimum-habana's default, pinned everywhere so runs compare
        "disable_tqdm": True,
        "logging_nan_inf_filter": False,
        "ignore_data_skip": True,  # train.loaders skips the trained batches itself, keeping timing and device decode
    }


def recipe_settings(config: TrainConfig, world_size: int) -> RecipeSettings:
    """The adapter's view of the run's configuration."""
    return RecipeSettings(training_kwargs=common_training_kwargs(config), hf_args=tuple(config.hf_args),
                          precision=config.precision, distribution_strategy=config.distribution_strategy,
                          world_size=world_size, throughput_warmup_steps=config.throughput_warmup_steps)
