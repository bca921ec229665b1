"""Common TrainingArguments for every accelerator, plus the user's hf_args pass-through."""

from __future__ import annotations

from .errors import ConfigError


def common_training_kwargs(config, output_dir: str) -> dict:
    """The study's settings, identical on every accelerator (the adapters add their own)."""
    return {
        "output_dir": output_dir,
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
        "eval_strategy": "no",
        "report_to": "none",  # our callback owns what is logged; transformers' MLflowCallback stays off
        "remove_unused_columns": False,
        "adam_epsilon": 1e-6,  # optimum-habana's default, pinned everywhere so runs compare
        "disable_tqdm": True,
        "logging_nan_inf_filter": False,
    }


def hf_args_overrides(args_class: type, hf_args: tuple) -> dict:
    """Typed values for the flags the user passed in hf_args; ConfigError on unknown or bad ones."""
    if not hf_args:
        return {}
    from transformers import HfArgumentParser

    parser = HfArgumentParser(args_class)

    def fail(message):
        raise ConfigError("hf_args", " ".join(hf_args), f"allowed: {args_class.__name__} flags ({message})")

    parser.error = fail
    namespace, unknown = parser.parse_known_args(["--output_dir", "unused", *hf_args])
    if unknown:
        fail(f"unknown flag {unknown[0]}")
    given = {a.split("=", 1)[0] for a in hf_args if a.startswith("--")}
    overrides = {}
    for action in parser._actions:
        if given.intersection(action.option_strings) and action.dest != "output_dir":
            overrides[action.dest] = getattr(namespace, action.dest)
    return overrides
