"""TrainConfig as a declared schema: each field has its default, its parser and its help. Stdlib only.

The CLI options, the MLflow params, the rank command line and MLproject's `train` parameters all
come from these fields, and a sweep reads its cells' train options back with them. Imports nothing heavy:
arguments are checked before torch or mlflow load.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .contract import ACCELERATOR_KINDS, FALSE_WORDS, REGISTER_CHECKPOINTS, TRUE_WORDS
from .errors import ConfigError
from .flag_owners import flag_owners, refuse_owned_flags
from .shell_words import shell_words
from .target import Target, parse_target, quality_target
from .text_fields import DATASET_CONFIG, EXPERIMENT_NAME, RUN_NAME, column, folder, register_name, run_id, source

Parser = Callable[[str, Any], Any]  # (field name, raw value) -> the field's value
MODEL_PRESETS = ("tiny", "base", "large")
DISTRIBUTION_STRATEGIES = ("ddp", "fast_ddp")
PRECISIONS = ("auto", "fp32", "bf16")
# fast: the project's CPU image path; study: optimum-habana's example transform (what the study measured)
IMAGE_BACKENDS = ("fast", "study")
INT64_MAX = 2**63 - 1  # torch's and numpy's integers: the largest whole number the code behind any field takes
SEED_MAX = 2**32 - 1  # numpy's RandomState seeds (transformers' set_seed seeds it with the run's seed)
MAX_SEQ_LENGTH = 512  # BridgeTower's text tower has 514 positions (2 taken by RoBERTa's offset)
ALIASES = ("mediapipe_dataloader",)  # train options that are no field of their own


def parse_bool(field_name: str, value: Any) -> bool:
    """Accept the spellings MLproject users type: true/false, yes/no, 1/0."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ConfigError(field_name, value, "allowed: true or false")


def parse_int(field_name: str, value: Any, minimum: int | None = None, maximum: int = INT64_MAX) -> int:
    """An integer from `minimum` to `maximum`; '2.0' is accepted (whole), '1e99' is not (past any maximum)."""
    try:
        text = str(value).strip()
        number = int(text) if text.lstrip("+-").isdigit() else float(text)
        if number != int(number):
            raise ValueError
        number = int(number)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(field_name, value, "allowed: a whole number") from None
    if minimum is not None and number < minimum:
        raise ConfigError(field_name, value, f"allowed: a whole number >= {minimum}")
    if number > maximum:
        raise ConfigError(field_name, value, f"allowed: a whole number <= {maximum}")
    return number


def parse_float(field_name: str, value: Any, minimum: float | None = None, exclusive: bool = False) -> float:
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


def parse_choice(field_name: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise ConfigError(field_name, value, "allowed: " + ", ".join(choices))
    return text


# field parsers: (field name, raw value) -> value ---------------------------------------------------
def choice(*choices: str) -> Parser:
    return lambda name, value: parse_choice(name, value, choices)


def whole(minimum: int | None = None, maximum: int = INT64_MAX) -> Parser:
    return lambda name, value: parse_int(name, value, minimum, maximum)


def positive_number(name: str, value: Any) -> float:
    return parse_float(name, value, 0.0, exclusive=True)


def steps_or_epochs(name: str, value: Any) -> int:
    steps = parse_int(name, value)
    if steps == 0 or steps < -1:
        raise ConfigError(name, value, "allowed: a whole number >= 1, or -1 to train by epochs")
    return steps


def step_range(name: str, value: Any) -> str:
    """profile_steps, `A-B`: the first and last global step of a window (1 <= A <= B), normalized; empty for none."""
    text = str(value).strip()
    if not text:
        return ""
    found = re.fullmatch(r"(\d+)\s*-\s*(\d+)", text)
    if not found or not 1 <= int(found.group(1)) <= int(found.group(2)):
        raise ConfigError(name, value, "allowed: A-B, the first and last global step to profile (1 <= A <= B), "
                                       "or empty for no profile")
    return f"{int(found.group(1))}-{int(found.group(2))}"


def training_flags(name: str, value: Any) -> tuple[str, ...]:
    """hf_args: `--flag value` words setting what no train option and not the project set."""
    words = shell_words(name, value)
    refuse_owned_flags(name, words, flag_owners(SCHEMA))
    return words


def option(default: Any, parse: Parser, help: str, project: bool = True, owns: tuple[str, ...] = ()) -> Any:
    """A TrainConfig field; `project=False` for what `mlflow run` sets itself (experiment, run name); `owns`: the
    TrainingArguments flags it sets under another name than its own (hf_args may set none of them)."""
    return dataclasses.field(default=default, metadata={"parse": parse, "help": help, "project": project,
                                                        "owns": owns})


@dataclass(frozen=True)
class TrainConfig:
    """Everything a `train` run is asked to do (what actually ran is recorded separately)."""

    accel: str = option("cpu", choice(*ACCELERATOR_KINDS), "accelerator kind")
    model: str = option("tiny", source(MODEL_PRESETS, "a Hub id (owner/name) or an existing local checkpoint"),
                        "tiny, base, large (random-init presets), a Hub id or a local checkpoint")
    dataset: str = option("sample", source(("sample",), "a Hub dataset id (owner/name) or an existing local folder"),
                          "sample, a local folder or a Hub dataset id")
    dataset_config: str = option("matching", DATASET_CONFIG, "Hub dataset config")
    image_column: str = option("image", column, "column holding the images")
    caption_column: str = option("image_description", column, "column holding the captions")
    per_device_train_batch_size: int = option(48, whole(1), "training batch per device",
                                              owns=("per_gpu_train_batch_size", "auto_find_batch_size"))
    per_device_eval_batch_size: int = option(16, whole(1), "evaluation batch per device",
                                             owns=("per_gpu_eval_batch_size",))
    dataloader_num_workers: int = option(1, whole(0), "data-loader worker processes per device")
    device_decode: bool = option(False, parse_bool, "decode JPEGs on the accelerator (alias mediapipe_dataloader)")
    allow_loader_fallback: bool = option(False, parse_bool, "train with the CPU loader when device decode fails")
    image_backend: str = option("fast", choice(*IMAGE_BACKENDS), "CPU image transform: fast, or study (the "
                                "optimum-habana example's, for the study's data-loader regime)")
    distribution_strategy: str = option("ddp", choice(*DISTRIBUTION_STRATEGIES), "ddp or fast_ddp (Gaudi)")
    devices: int = option(1, whole(1), "devices (processes); >1 launches the ranks")
    max_steps: int = option(-1, steps_or_epochs, "training steps, -1 to train by epochs")
    num_train_epochs: float = option(5.0, positive_number, "epochs when max_steps is -1")
    learning_rate: float = option(1e-5, positive_number, "peak learning rate")
    throughput_warmup_steps: int = option(3, whole(0), "steps left out of train_samples_per_second")
    logging_steps: int = option(10, whole(1), "steps between logged losses and step throughput",
                                owns=("logging_strategy",))
    eval_steps: int = option(0, whole(0), "evaluate every N optimizer steps (each evaluation logged at its step); "
                             "0: once, at the end", owns=("eval_strategy",))
    target: str = option("", quality_target, "quality target: one eval metric, one comparison, one value, e.g. "
                         "eval_recall_at_5>=0.20 (time_to_target_seconds, samples_to_target ...); empty: none",
                         owns=("metric_for_best_model", "greater_is_better"))
    stop_at_target: bool = option(True, parse_bool, "with a target: stop at the first evaluation that reaches it")
    register_checkpoint: str = option("auto", choice("auto", *REGISTER_CHECKPOINTS),
                                      "what register_as registers: best (the evaluated checkpoint best by the "
                                      "target's metric) or last; auto: best with a target, else last",
                                      owns=("load_best_model_at_end",))
    profile_steps: str = option("", step_range, "A-B: a torch.profiler window over global steps A..B, logged under "
                                "profile/ and kept out of the measured window; empty: off")
    seed: int = option(42, whole(0, SEED_MAX), "random seed")
    precision: str = option("auto", choice(*PRECISIONS), "auto, fp32 or bf16", owns=(
        "bf16", "fp16", "bf16_full_eval", "fp16_full_eval", "half_precision_backend", "fp16_backend", "fp8"))
    max_seq_length: int = option(128, whole(8, MAX_SEQ_LENGTH), "caption tokens")
    max_train_samples: int = option(0, whole(0), "rows of the training split to use, 0 for all")
    max_eval_samples: int = option(0, whole(0), "rows of the validation split to use, 0 for all")
    save_steps: int = option(0, whole(0), "steps between checkpoints (needed for resume), 0 for none",
                             owns=("save_strategy",))
    register_as: str = option("", register_name, "registered model name; empty: do not register")
    log_model: bool = option(True, parse_bool, "log the fine-tuned model")
    resume: bool = option(False, parse_bool, "continue the last run in output_dir from its last complete checkpoint",
                          owns=("resume_from_checkpoint",))
    checkpoint_upload: bool = option(False, parse_bool, "log each checkpoint to the tracking server (checkpoints/), "
                                     "keeping the latest complete one, so a resume works on an empty disk")
    run_id: str = option("", run_id, "with resume: the run to continue when output_dir is empty or new (default: "
                         "the one last trained in output_dir, else MLFLOW_RUN_ID)")
    output_dir: str = option("outputs", folder, "folder for checkpoints and the model")
    experiment_name: str = option("", EXPERIMENT_NAME, "MLflow experiment (mlflow run sets its own)", project=False)
    run_name: str = option("", RUN_NAME, "MLflow run name (default: derived from the settings)", project=False)
    hf_args: tuple[str, ...] = option((), training_flags, "extra TrainingArguments flags, e.g. '--warmup_steps 10'")

    def to_params(self) -> dict[str, Any]:
        """The asked-for settings as flat MLflow params (hf_args as one string).

        `resume` is left out: it is how a run continues, not what shaped it, and params are immutable.
        """
        params = self.to_fields()
        params.pop("resume")
        params.pop("run_id")  # how a run continues, like resume
        params.pop("checkpoint_upload")  # where checkpoints are kept, not what shaped the run
        return params

    def to_fields(self) -> dict[str, Any]:
        fields = dataclasses.asdict(self)
        fields["hf_args"] = shlex.join(self.hf_args)
        return fields


SCHEMA = dataclasses.fields(TrainConfig)


def build_train_config(**raw: Any) -> TrainConfig:
    """Validate raw CLI/MLproject values (strings allowed) into a TrainConfig; raises ConfigError."""
    values = {}
    for spec in SCHEMA:
        value = raw.get(spec.name)
        values[spec.name] = spec.metadata["parse"](spec.name, spec.default if value is None else value)
    if raw.get("mediapipe_dataloader") is not None:
        values["device_decode"] = values["device_decode"] or parse_bool("mediapipe_dataloader",
                                                                        raw["mediapipe_dataloader"])
    config = TrainConfig(**values)
    if config.register_as and not config.log_model:
        raise ConfigError("log_model", "false", "allowed: true when register_as is set (a version needs a model)")
    if config.run_id and not config.resume:
        raise ConfigError("run_id", config.run_id, "allowed only with resume true (it names the run to continue)")
    if config.device_decode and config.image_backend != "fast":
        raise ConfigError("image_backend", config.image_backend, "allowed: fast when device_decode is true (device "
                                                                 "loaders decode on the accelerator, not with it)")
    if config.register_checkpoint == "best" and not config.target:
        raise ConfigError("register_checkpoint", "best", "allowed: last or auto without a target (best is ranked "
                                                          "by the target's metric)")
    check_profile_window(config.profile_steps, config.throughput_warmup_steps, config.max_steps)
    return config


def quality_of(config: TrainConfig) -> Target | None:
    """The run's quality target; None without one."""
    return parse_target(config.target)


def checkpoint_to_register(config: TrainConfig) -> str:
    """best or last: what register_as registers."""
    if config.register_checkpoint == "auto":
        return "best" if config.target else "last"
    return config.register_checkpoint


def profile_window(config: TrainConfig) -> tuple[int, int] | None:
    """(first, last) global step of the profiler window; None when off."""
    return step_window(config.profile_steps)


def step_window(text: str) -> tuple[int, int] | None:
    """(first, last) of a parsed `A-B`; None for empty."""
    if not text:
        return None
    first, last = text.split("-")
    return int(first), int(last)


def check_profile_window(text: str, warmup: int, max_steps: int) -> None:
    """The window lies after the warmup, within max_steps (when set), and leaves a measured step outside it."""
    window = step_window(text)
    if window is None:
        return
    first, last = window
    if first <= warmup:
        raise ConfigError("profile_steps", text, f"allowed: steps after the {warmup} warmup steps (A > {warmup}): "
                                                 "the warmup is not the steady state a profile should show")
    if max_steps > 0 and last > max_steps:
        raise ConfigError("profile_steps", text, f"allowed: steps within max_steps ({max_steps})")
    if max_steps > 0 and max_steps - warmup - (last - first + 1) < 1:
        raise ConfigError("profile_steps", text, "allowed: a window that leaves at least one measured step "
                                                 "(profiled steps are kept out of train_samples_per_second)")


def to_cli_args(config: TrainConfig) -> list[str]:
    """The `train` command line that rebuilds `config` (used to start the ranks of a multi-device run)."""
    argv = []
    for key, value in config.to_fields().items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def train_fields(argv: Sequence[str]) -> dict[str, str]:
    """`--max-steps 5 --hf_args=--x` -> {'max_steps': '5', 'hf_args': '--x'}: the options train would read (the last
    of a repeated one wins); words that are no train option are left to train."""
    names = {spec.name for spec in SCHEMA} | set(ALIASES)
    fields: dict[str, str] = {}
    words = iter(argv)
    for word in words:
        name, equals, value = word.removeprefix("--").partition("=")
        name = name.replace("-", "_")
        if not word.startswith("--") or name not in names:
            continue
        given = value if equals else next(words, None)
        if given is not None:
            fields[name] = given
    return fields


def check_train_args(argv: Sequence[str]) -> None:
    """ConfigError, naming the field, for the first train option in `argv` that train would refuse: a sweep checks
    its cells' pass-through options before any cell starts (one bad value would fail every cell, each in its run)."""
    build_train_config(**train_fields(argv))
