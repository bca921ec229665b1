"""Configuration validation: every bad value names its field and what is allowed."""

import pytest

from bridgetower_mlflow.config import TrainConfig, build_train_config, to_cli_args
from bridgetower_mlflow.errors import ConfigError


def test_defaults_are_the_study_recipe():
    config = build_train_config()
    batches = (config.per_device_train_batch_size, config.per_device_eval_batch_size)
    assert config.learning_rate == 1e-5 and batches == (48, 16)
    assert config.throughput_warmup_steps == 3 and config.accel == "cpu" and config.model == "tiny"


def test_strings_from_mlproject_are_parsed():
    config = build_train_config(accel="H100", device_decode="True", dataloader_num_workers="2",
                                learning_rate="5e-5", num_train_epochs="2", hf_args="--warmup_steps 5")
    assert config.accel == "h100" and config.device_decode is True and config.dataloader_num_workers == 2
    assert config.learning_rate == 5e-5 and config.hf_args == ("--warmup_steps", "5")


def test_mediapipe_dataloader_is_an_alias_of_device_decode():
    assert build_train_config(mediapipe_dataloader="true").device_decode is True


@pytest.mark.parametrize("field,value,allowed", [
    ("accel", "tpu", "allowed: cpu, cuda, a100, h100, h200, gaudi, gaudi2, gaudi3"),
    ("dataloader_num_workers", "-1", ">= 0"),
    ("per_device_train_batch_size", "0", ">= 1"),
    ("learning_rate", "-1", "> 0.0"),
    ("learning_rate", "fast", "a number"),
    ("device_decode", "maybe", "true or false"),
    ("max_steps", "0", "-1 to train by epochs"),
    ("distribution_strategy", "zero3", "ddp, fast_ddp"),
    ("devices", "0", ">= 1"),
    ("register_as", "a/b", "without '/'"),
])
def test_bad_values_name_field_and_allowed(field, value, allowed):
    with pytest.raises(ConfigError) as caught:
        build_train_config(**{field: value})
    message = str(caught.value)
    assert message.startswith(f"{field}: invalid value") and allowed in message and "\n" not in message


def test_cli_args_round_trip():
    config = build_train_config(accel="cpu", devices="2", hf_args="--warmup_steps 5", device_decode="false")
    argv = to_cli_args(config)
    pairs = dict(zip(argv[::2], argv[1::2]))
    rebuilt = build_train_config(**{k[2:].replace("-", "_"): v for k, v in pairs.items()})
    assert rebuilt == config


def test_to_params_flattens_hf_args():
    assert TrainConfig(hf_args=("--warmup_steps", "5")).to_params()["hf_args"] == "--warmup_steps 5"


def test_image_backend_defaults_to_fast_and_study_refuses_device_decode():
    assert build_train_config().image_backend == "fast"
    assert build_train_config(image_backend="Study").image_backend == "study"
    assert TrainConfig().to_params()["image_backend"] == "fast"
    with pytest.raises(ConfigError, match=r"^image_backend: invalid value 'bogus'; allowed: fast, study$"):
        build_train_config(image_backend="bogus")
    with pytest.raises(ConfigError, match=r"^image_backend: invalid value 'study'; allowed: fast when device_decode"):
        build_train_config(image_backend="study", device_decode="true")
