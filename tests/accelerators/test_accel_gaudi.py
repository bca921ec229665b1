"""Gaudi adapter on CPU over the on-disk fake of Habana's PyTorch bridge (optimum-habana: test_gaudi_recipe.py)."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from bridgetower_mlflow.accelerators.gaudi import detect as gaudi_detect
from bridgetower_mlflow.accelerators.gaudi.adapter import GaudiAccelerator
from bridgetower_mlflow.accelerators.gaudi.arguments import (
    NATIVE_PATH,
    OPTIMUM_PATH,
    choose_gaudi_path,
    gaudi_training_kwargs,
    mpirun_command,
    parse_lscpu,
)
from bridgetower_mlflow.accelerators.installed import module_present
from bridgetower_mlflow.errors import AcceleratorUnavailable, ConfigError

from tests.fakes import (
    BRIDGE,
    install_habana,
)
from tests.fakes.requests import device, settings

pytestmark = pytest.mark.gaudi_stack

COMMON = {"output_dir": "out", "per_device_train_batch_size": 48, "report_to": "none",
          "remove_unused_columns": False, "adam_epsilon": 1e-8, "use_cpu": True}
needs_hpu = pytest.mark.skipif(not module_present("habana_frameworks.torch"),
                               reason="no Gaudi device (habana_frameworks.torch not importable)")


@pytest.fixture(autouse=True)
def no_hl_smi(monkeypatch):
    monkeypatch.setattr(gaudi_detect.shutil, "which", lambda name: None)


@pytest.mark.parametrize("name, label", [("GAUDI2", "gaudi2"), ("GAUDI3", "gaudi3"), (b"HL-225".decode(), "gaudi2"),
                                         ("HL-325L", "gaudi3"), ("HL-338", "gaudi3"), ("HL-205", "gaudi"),
                                         ("GAUDI", "gaudi")])
def test_label_from_device_name(name, label):
    assert gaudi_detect.gaudi_label(name) == label


def test_absent_habana_is_one_clear_line():
    with pytest.raises(AcceleratorUnavailable) as error:
        GaudiAccelerator("gaudi2").detect(1, 1)
    assert str(error.value).startswith(
        "accel: gaudi2 requested but no Gaudi device is present (habana_frameworks.torch not importable); "
        "allowed here: cpu")


def test_detect_through_hl_smi_then_torch(monkeypatch):
    install_habana(monkeypatch, name="GAUDI3", count=4)
    monkeypatch.setattr(gaudi_detect.shutil, "which", lambda name: "/usr/bin/hl-smi")
    from bridgetower_mlflow.samplers import hl_smi

    monkeypatch.setattr(hl_smi, "run_hl_smi", lambda fields: "HL-325L, 131072, 1.24.0-abc\n" * 8)
    info = GaudiAccelerator("gaudi3").detect(8, 8)
    assert (info.kind, info.count, info.memory_gb, info.driver) == ("gaudi3", 8, 128.0, "1.24.0-abc")
    monkeypatch.setattr(gaudi_detect.shutil, "which", lambda name: None)
    info = GaudiAccelerator("gaudi3").detect(2, 2)
    assert info.extra_tags["gaudi.detected_by"] == "habana_frameworks" and info.device_name == "GAUDI3"
    with pytest.raises(AcceleratorUnavailable, match="devices: invalid value 8"):
        GaudiAccelerator("gaudi3").detect(8, 8)


def test_path_choice():
    assert choose_gaudi_path(None, None, "5.24.0") == NATIVE_PATH
    assert choose_gaudi_path("1.21.2", "<4.56.0,>=4.55.0", "4.55.4") == OPTIMUM_PATH
    assert choose_gaudi_path("1.21.2", "<4.56.0,>=4.55.0", "5.24.0", override="native") == NATIVE_PATH
    with pytest.raises(AcceleratorUnavailable, match="transformers: 5.24.0 is installed but optimum-habana 1.21.2"):
        choose_gaudi_path("1.21.2", "<4.56.0,>=4.55.0", "5.24.0")
    with pytest.raises(ConfigError, match="BRIDGETOWER_GAUDI_PATH"):
        choose_gaudi_path(None, None, "5.24.0", override="fast")


def test_gaudi_kwargs_carry_the_study_flags():
    kwargs = gaudi_training_kwargs(COMMON, settings(COMMON, world_size=8, warmup=3),
                                   gaudi_config_name="Habana/clip", strategies={"ddp", "fast_ddp"})
    assert kwargs["use_habana"] and kwargs["use_lazy_mode"] and kwargs["use_hpu_graphs_for_inference"]
    assert kwargs["gaudi_config_name"] == "Habana/clip" and kwargs["throughput_warmup_steps"] == 3
    assert kwargs["sdp_on_bf16"] and kwargs["bf16"] and kwargs["ddp_backend"] == "hccl"
    assert kwargs["distribution_strategy"] == "ddp" and "use_cpu" not in kwargs and kwargs["adam_epsilon"] == 1e-8


def test_fast_ddp_only_where_the_installed_version_has_it():
    fast = settings(COMMON, strategy="fast_ddp")
    kwargs = gaudi_training_kwargs(COMMON, fast, gaudi_config_name="x", strategies={"ddp", "fast_ddp"})
    assert kwargs["distribution_strategy"] == "fast_ddp"
    for strategies in (None, {"ddp"}):
        with pytest.raises(ConfigError, match="distribution_strategy: invalid value 'fast_ddp'; allowed with"):
            gaudi_training_kwargs(COMMON, fast, gaudi_config_name="x", strategies=strategies)


def test_native_path_uses_plain_trainer(monkeypatch):
    install_habana(monkeypatch)
    adapter, native = GaudiAccelerator("gaudi2"), device("gaudi2", 1, NATIVE_PATH)
    from transformers import Trainer, TrainingArguments

    recipe = adapter.recipe(native, settings(dict(COMMON), precision="fp32"))
    args = recipe.build_arguments()
    assert type(args) is TrainingArguments and recipe.trainer_class is Trainer
    assert recipe.trainer_kwargs == {}
    with pytest.raises(ConfigError, match="native HPU path"):
        adapter.recipe(native, settings(dict(COMMON), strategy="fast_ddp"))
    # the bridge loaded eagerly (the default): Habana's recipe is torch.compile with its backend, no mark_step
    assert (args.torch_compile, args.torch_compile_backend) == (True, "hpu_backend") and recipe.callbacks == ()
    assert recipe.tags == {"gaudi.execution_mode": "eager"}


def test_native_lazy_mode_marks_a_step_after_backward_and_after_the_optimizer(monkeypatch, tmp_path):
    """A real Trainer loop (on the CPU) with the native lazy recipe's callback: two mark_steps a step."""
    core = install_habana(monkeypatch, lazy_env="1")
    recipe = GaudiAccelerator("gaudi2").recipe(device("gaudi2", 1, NATIVE_PATH), settings(dict(COMMON)))
    assert recipe.tags == {"gaudi.execution_mode": "lazy"} and len(recipe.callbacks) == 1
    from transformers import Trainer, TrainingArguments

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 1)

        def forward(self, x):
            return {"loss": self.linear(x).pow(2).mean()}

    rows = [{"x": torch.randn(4)} for _ in range(12)]
    args = TrainingArguments(str(tmp_path), max_steps=5, per_device_train_batch_size=2, use_cpu=True,
                             report_to="none", disable_tqdm=True, save_strategy="no")
    Trainer(Tiny(), args, train_dataset=rows, callbacks=list(recipe.callbacks)).train()
    assert core.mark_steps == 10


def test_stack_environment_asks_the_mode_before_torch_loads_the_bridge(monkeypatch):
    adapter = GaudiAccelerator("gaudi2")
    monkeypatch.setattr("bridgetower_mlflow.accelerators.gaudi.adapter.installed_gaudi_path", lambda: OPTIMUM_PATH)
    assert adapter.stack_environment() == {"PT_HPU_LAZY_MODE": "1"}
    assert adapter.stack_environment(("--use_lazy_mode", "false")) == {"PT_HPU_LAZY_MODE": "0"}
    monkeypatch.setattr("bridgetower_mlflow.accelerators.gaudi.adapter.installed_gaudi_path", lambda: NATIVE_PATH)
    assert adapter.stack_environment() == {"PT_HPU_LAZY_MODE": "0"}


def test_a_launcher_counts_devices_without_opening_one(monkeypatch, tmp_path):
    record = tmp_path / "hpu.jsonl"
    install_habana(monkeypatch, count=4, record=record)
    monkeypatch.setenv("PYTHONPATH", str(BRIDGE))  # the child process finds the same bridge
    info = GaudiAccelerator("gaudi2").detect(4, 4, launcher=True)
    assert (info.count, info.extra_tags["gaudi.detected_by"]) == (4, "habana_frameworks (child process)")
    opened = [json.loads(line)["pid"] for line in record.read_text().splitlines()
              if json.loads(line)["event"] == "devices_acquired"]
    assert opened and os.getpid() not in opened  # the child held them and let go when it exited


def test_mpirun_line_matches_gaudi_spawn():
    cores, per_socket = parse_lscpu("Socket(s):            2\nCore(s) per socket:   40\n")
    command = mpirun_command(8, ["train", "--accel", "gaudi2"], physical_cores=cores, cores_per_socket=per_socket,
                             env={"PT_HPU_LAZY_MODE": "1"})
    assert command == ["mpirun", "-n", "8", "--bind-to", "core", "--map-by", "socket:PE=10", "--rank-by", "slot",
                       "--report-bindings", "--allow-run-as-root", "--mca", "odls_base_sigkill_timeout", "25",
                       "-x", "MASTER_ADDR=localhost",
                       "-x", "MASTER_PORT=29500", "-x", "PT_HPU_LAZY_MODE=1", sys.executable, "-m",
                       "bridgetower_mlflow", "train", "--accel", "gaudi2"]
    assert "slot:PE=4" in mpirun_command(2, [], physical_cores=8, cores_per_socket=1)


def test_peak_memory_uses_the_hpu_module(monkeypatch):
    install_habana(monkeypatch)
    assert GaudiAccelerator("gaudi2").peak_memory_gb() == 3.0


@pytest.mark.hpu
@needs_hpu
def test_real_gaudi_detect():
    info = GaudiAccelerator("gaudi").detect(1, 1)
    assert info.kind in ("gaudi2", "gaudi3")
