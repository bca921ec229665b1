"""One owner per setting: an hf_args flag that a train option (or the project) sets is refused in one line naming
the option to use instead, while the config is built: before torch, transformers or mlflow load, before any run."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.cli import main
from bridgetower_mlflow.config import SCHEMA, build_train_config, option
from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.flag_owners import PROJECT_FLAGS, flag_owners, owned_flags_help

OWNED = flag_owners(SCHEMA)
# what the Gaudi adapter reads its execution mode from, the Gaudi CPU-mode tests pass, and the truth harness uses
STILL_ALLOWED = ("--use_cpu true --use_habana false --use_lazy_mode false --gradient_accumulation_steps 2 "
                 "--dataloader_drop_last false --dataloader_persistent_workers true --tf32 false --warmup_steps 10")


def _refusal(hf_args: str) -> str:
    with pytest.raises(ConfigError) as caught:
        build_train_config(hf_args=hf_args)
    return str(caught.value)


@pytest.mark.parametrize("spelling", ["--per_device_train_batch_size 4", "--per_device_train_batch_size=4",
                                      "--per-device-train-batch-size 4", "--per-device-train-batch-size=4"])
def test_every_spelling_the_parser_takes_is_refused_naming_the_option(spelling):
    assert _refusal(f"--warmup_steps 2 {spelling}") == (
        f"hf_args: invalid value '{spelling}'; allowed: flags no train option owns (one owner per setting): use "
        "--per-device-train-batch-size instead")


@pytest.mark.parametrize("spec", [spec for spec in SCHEMA if spec.name != "hf_args"], ids=lambda spec: spec.name)
def test_each_field_owns_its_own_flag_and_what_it_declares(spec):
    for flag in (spec.name, *spec.metadata["owns"]):
        assert _refusal(f"--{flag} 1").endswith(f"use --{spec.name.replace('_', '-')} instead"), flag


@pytest.mark.parametrize("flag", sorted(PROJECT_FLAGS))
def test_what_the_project_sets_is_refused_with_its_reason(flag):
    for spelling in (f"--{flag} x", f"--no_{flag}", f"--no-{flag.replace('_', '-')}"):
        assert f"allowed: flags the project does not set: {flag} is set by the project ({PROJECT_FLAGS[flag]})" \
            in _refusal(spelling)


def test_a_new_field_owns_its_flags_without_a_list_by_hand():
    @dataclasses.dataclass(frozen=True)
    class Wider:
        warmup_ratio: float = option(0.0, lambda name, value: value, "share of steps warming up")
        optimizer: str = option("adamw", lambda name, value: value, "optimizer", owns=("optim",))

    owners = flag_owners(dataclasses.fields(Wider))
    assert owners["warmup_ratio"] == "--warmup-ratio" and owners["optim"] == "--optimizer"


def test_the_flags_the_adapters_and_harnesses_pass_stay_allowed():
    assert build_train_config(hf_args=STILL_ALLOWED).hf_args == tuple(STILL_ALLOWED.split())


def test_precision_owns_the_half_precision_switches():
    assert {"bf16", "fp16", "bf16_full_eval", "fp16_full_eval"} <= {f for f, o in OWNED.items() if o == "--precision"}
    assert _refusal("--bf16=true").endswith("use --precision instead")


def test_train_help_lists_what_hf_args_may_not_set():
    done = CliRunner().invoke(main, ["train", "--help"], terminal_width=10_000)
    text = " ".join(done.output.split())
    assert done.exit_code == 0 and " ".join(owned_flags_help(SCHEMA).split()) in text
    for flag, owner in OWNED.items():
        assert f"--{flag}" in text or owner == f"--{flag.replace('_', '-')}", flag


def test_train_refuses_an_owned_flag_in_one_line_before_any_run(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    done = CliRunner().invoke(main, ["train", "--max-steps", "4", "--hf-args", "--max_steps 5"])
    assert done.exit_code == 2 and done.output.splitlines() == [
        "error: hf_args: invalid value '--max_steps 5'; allowed: flags no train option owns (one owner per "
        "setting): use --max-steps instead"]
    assert not (tmp_path / "mlflow.db").exists()  # nothing reached the store


def test_a_sweep_refuses_an_owned_flag_at_its_start(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    done = CliRunner().invoke(main, ["sweep", "--workers", "0", "--repeats", "1", "--device-decode", "false",
                                     "--hf-args", "--report_to wandb"])
    assert done.exit_code == 2, done.output
    assert done.output.splitlines() == [
        f"error: hf_args: invalid value '--report_to wandb'; allowed: flags the project does not set: report_to is "
        f"set by the project ({PROJECT_FLAGS['report_to']})"]
    assert not (tmp_path / "mlflow.db").exists()


def test_the_parser_takes_no_abbreviation_an_owner_check_could_miss():
    """HfArgumentParser would read `--max_step` as --max_steps (argparse's prefixes); hf_args takes exact names."""
    from transformers import TrainingArguments

    from bridgetower_mlflow.accelerators.hf_args import hf_args_overrides

    with pytest.raises(ConfigError, match="unknown flag --max_step"):
        hf_args_overrides(TrainingArguments, ("--max_step", "5"))
    assert hf_args_overrides(TrainingArguments, ("--warmup_steps", "3")) == {"warmup_steps": 3}

