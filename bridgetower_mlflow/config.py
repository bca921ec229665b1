"""Frozen run configuration: validation and flattening to MLflow params.

Imports nothing heavy: the CLI validates arguments before torch, transformers or mlflow load.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field

from .errors import ConfigError

ACCELERATOR_KINDS = ("cpu", "cuda", "a100", "h100", "h200", "gaudi", "gaudi2", "gaudi3")
MODEL_PRESETS = ("tiny", "base", "large")
DISTRIBUTION_STRATEGIES = ("ddp", "fast_ddp")
PRECISIONS = ("auto", "fp32", "bf16")
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


def parse_bool(field_name: str, value) -> bool:
    """Accept the spellings MLproject users type: true/false, yes/no, 1/0."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ConfigError(field_name, value, "allowed: true or false")


def parse_int(field_name: str, value, minimum: int | None = None) -> int:
    """An integer at least `minimum`; floats like '2.0' are accepted when whole."""
    try:
        number = float(value)
        if number != int(number):
            raise ValueError
        number = int(number)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(field_name, value, "allowed: a whole number") from None
    if minimum is not None and number < minimum:
        raise ConfigError(field_name, value, f"allowed: a whole number >= {minimum}")
    return number


def parse_float(field_name: str, value, minimum: float | None = None, exclusive: bool = False) -> float:
    """A finite float above (or at least) `minimum`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field_name, value, "allowed: a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ConfigError(field_name, value, "allowed: a finite number")
    if minimum is not None and (number <= minimum if exclusive else number < minimum):
        relation = ">" if exclusive else ">="
        raise ConfigError(field_name, value, f"allowed: a number {relation} {minimum}")
    return number


def parse_choice(field_name: str, value, choices) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise ConfigError(field_name, value, "allowed: " + ", ".join(choices))
    return text


@dataclass(frozen=True)
class TrainConfig:
    """Everything a `train` run is asked to do (what actually ran is recorded separately)."""

    accel: str = "cpu"
    model: str = "tiny"
    dataset: str = "sample"
    dataset_config: str = "matching"
    image_column: str = "image"
    caption_column: str = "image_description"
    per_device_train_batch_size: int = 48
    per_device_eval_batch_size: int = 16
    dataloader_num_workers: int = 1
    device_decode: bool = False
    allow_loader_fallback: bool = False
    distribution_strategy: str = "ddp"
    devices: int = 1
    max_steps: int = -1
    num_train_epochs: float = 5.0
    learning_rate: float = 1e-5
    throughput_warmup_steps: int = 3
    logging_steps: int = 10
    seed: int = 42
    precision: str = "auto"
    max_seq_length: int = 128
    max_train_samples: int = 0
    max_eval_samples: int = 0
    save_steps: int = 0
    register_as: str = ""
    log_model: bool = True
    resume: bool = False
    output_dir: str = "outputs"
    experiment_name: str = ""
    run_name: str = ""
    hf_args: tuple = field(default_factory=tuple)

    def to_params(self) -> dict:
        """The asked-for settings as flat MLflow params (hf_args as one string).

        `resume` is left out: it is how a run continues, not what shaped it, and params are immutable.
        """
        params = self.to_fields()
        params.pop("resume")
        return params

    def to_fields(self) -> dict:
        fields = dataclasses.asdict(self)
        fields["hf_args"] = shlex.join(self.hf_args)
        return fields


def _check_register_name(name: str) -> str:
    name = name.strip()
    if name and (len(name) > 250 or any(c in name for c in "/:@%\\") or ".." in name):
        raise ConfigError(
            "register_as", name,
            "allowed: a registered-model name of at most 250 characters without '/', ':', '@', '%', '\\' or '..'",
        )
    return name


def build_train_config(**raw) -> TrainConfig:
    """Validate raw CLI/MLproject values (strings allowed) into a TrainConfig; raises ConfigError."""
    defaults = TrainConfig()
    get = lambda key: raw.get(key) if raw.get(key) is not None else getattr(defaults, key)  # noqa: E731
    accel = parse_choice("accel", get("accel"), ACCELERATOR_KINDS)
    model = str(get("model")).strip()
    if not model:
        raise ConfigError("model", model, "allowed: " + ", ".join(MODEL_PRESETS) + ", a Hub id or a local path")
    dataset = str(get("dataset")).strip()
    if not dataset:
        raise ConfigError("dataset", dataset, "allowed: sample, a local folder or a Hub dataset id")
    device_decode = parse_bool("device_decode", get("device_decode"))
    if raw.get("mediapipe_dataloader") is not None:
        device_decode = device_decode or parse_bool("mediapipe_dataloader", raw["mediapipe_dataloader"])
    max_steps = parse_int("max_steps", get("max_steps"))
    if max_steps == 0 or max_steps < -1:
        raise ConfigError("max_steps", get("max_steps"), "allowed: a whole number >= 1, or -1 to train by epochs")
    hf_args = get("hf_args")
    if isinstance(hf_args, str):
        try:
            hf_args = tuple(shlex.split(hf_args))
        except ValueError as exc:
            raise ConfigError("hf_args", hf_args, f"allowed: shell-quoted --flag value pairs ({exc})") from None
    config = TrainConfig(
        accel=accel,
        model=model,
        dataset=dataset,
        dataset_config=str(get("dataset_config")).strip(),
        image_column=str(get("image_column")).strip(),
        caption_column=str(get("caption_column")).strip(),
        per_device_train_batch_size=parse_int("per_device_train_batch_size", get("per_device_train_batch_size"), 1),
        per_device_eval_batch_size=parse_int("per_device_eval_batch_size", get("per_device_eval_batch_size"), 1),
        dataloader_num_workers=parse_int("dataloader_num_workers", get("dataloader_num_workers"), 0),
        device_decode=device_decode,
        allow_loader_fallback=parse_bool("allow_loader_fallback", get("allow_loader_fallback")),
        distribution_strategy=parse_choice(
            "distribution_strategy", get("distribution_strategy"), DISTRIBUTION_STRATEGIES
        ),
        devices=parse_int("devices", get("devices"), 1),
        max_steps=max_steps,
        num_train_epochs=parse_float("num_train_epochs", get("num_train_epochs"), 0.0, exclusive=True),
        learning_rate=parse_float("learning_rate", get("learning_rate"), 0.0, exclusive=True),
        throughput_warmup_steps=parse_int("throughput_warmup_steps", get("throughput_warmup_steps"), 0),
        logging_steps=parse_int("logging_steps", get("logging_steps"), 1),
        seed=parse_int("seed", get("seed"), 0),
        precision=parse_choice("precision", get("precision"), PRECISIONS),
        max_seq_length=parse_int("max_seq_length", get("max_seq_length"), 8),
        max_train_samples=parse_int("max_train_samples", get("max_train_samples"), 0),
        max_eval_samples=parse_int("max_eval_samples", get("max_eval_samples"), 0),
        save_steps=parse_int("save_steps", get("save_steps"), 0),
        register_as=_check_register_name(str(get("register_as"))),
        log_model=parse_bool("log_model", get("log_model")),
        resume=parse_bool("resume", get("resume")),
        output_dir=str(get("output_dir")),
        experiment_name=str(get("experiment_name")).strip(),
        run_name=str(get("run_name")).strip(),
        hf_args=tuple(hf_args),
    )
    if config.register_as and not config.log_model:
        raise ConfigError("log_model", "false", "allowed: true when register_as is set (a version needs a model)")
    return config


def to_cli_args(config: TrainConfig) -> list[str]:
    """The `train` command line that rebuilds `config` (used to start the ranks of a multi-device run)."""
    argv = []
    for key, value in config.to_fields().items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv
