"""The Gaudi adapter's recipe against the real optimum-habana 1.21.2: GaudiTrainingArguments, GaudiConfig and
GaudiTrainer as installed, over the on-disk fake of Habana's PyTorch bridge. Runs in the Gaudi-stack environment.
"""

from __future__ import annotations

import pytest

pytest.importorskip("optimum.habana", reason="the Gaudi stack (optimum-habana 1.21.2) runs in .venv-gaudi")

from optimum.habana import GaudiTrainer, GaudiTrainingArguments

from bridgetower_mlflow.accelerators.gaudi.adapter import GaudiAccelerator, supported_strategies
from bridgetower_mlflow.accelerators.gaudi.arguments import OPTIMUM_PATH

from tests.fakes import install_habana
from tests.fakes.requests import device, settings

pytestmark = pytest.mark.gaudi_stack

COMMON = {"output_dir": "out", "per_device_train_batch_size": 48, "report_to": "none",
          "remove_unused_columns": False, "adam_epsilon": 1e-6}
CPU_MODE = ("--use_habana", "false", "--use_cpu", "true", "--use_lazy_mode", "false",
            "--use_hpu_graphs_for_inference", "false", "--torch_compile", "false")


def _recipe(monkeypatch, tmp_path, lazy_env="1", **overrides):
    install_habana(monkeypatch, lazy_env=lazy_env)
    return GaudiAccelerator("gaudi2").recipe(device("gaudi2", overrides.pop("count", 1), OPTIMUM_PATH),
                                             settings(dict(COMMON, output_dir=str(tmp_path)), **overrides))


def test_this_optimum_habana_offers_fast_ddp():
    assert supported_strategies(GaudiTrainingArguments) == {"ddp", "fast_ddp"}


def test_the_study_recipe_is_what_gaudi_training_arguments_accept(monkeypatch, tmp_path):
    """Lazy bridge: GaudiTrainer, the study's flags, the Gaudi config object; every keyword a real field."""
    recipe = _recipe(monkeypatch, tmp_path, world_size=8, count=8)
    kwargs = recipe.arguments_kwargs
    assert recipe.arguments_class is GaudiTrainingArguments and issubclass(recipe.trainer_class, GaudiTrainer)
    assert (kwargs["use_habana"], kwargs["use_lazy_mode"], kwargs["use_hpu_graphs_for_inference"]) == (True,) * 3
    assert (kwargs["ddp_backend"], kwargs["sdp_on_bf16"], kwargs["bf16"]) == ("hccl", True, True)
    fields = {f.name for f in GaudiTrainingArguments.__dataclass_fields__.values()}
    assert set(kwargs) <= fields, set(kwargs) - fields
    gaudi_config = recipe.trainer_kwargs["gaudi_config"]
    assert gaudi_config.use_torch_autocast and recipe.precision == "bf16"
    assert recipe.extra_params["gaudi_config"]["use_fused_adam"] is True
    assert recipe.tags == {"gaudi.execution_mode": "lazy"}
    fp32 = _recipe(monkeypatch, tmp_path, precision="fp32")
    assert fp32.trainer_kwargs["gaudi_config"].use_torch_autocast is False and fp32.precision == "fp32"


def test_offline_the_default_gaudi_config_is_the_embedded_copy(monkeypatch, tmp_path):
    """No Hub here: Habana/clip's gaudi_config.json comes from the copy the adapter carries."""
    recipe = _recipe(monkeypatch, tmp_path)
    assert recipe.arguments_kwargs["gaudi_config_name"] == str(tmp_path / "gaudi_config")
    assert (tmp_path / "gaudi_config" / "gaudi_config.json").exists()


def test_the_mode_is_what_the_bridge_loaded_not_what_the_variable_says(tmp_path, monkeypatch):
    install_habana(monkeypatch, lazy_env="0")
    monkeypatch.setenv("PT_HPU_LAZY_MODE", "1")  # set too late: the bridge is already loaded, eagerly
    recipe = GaudiAccelerator("gaudi2").recipe(device("gaudi2", 1, OPTIMUM_PATH),
                                               settings(dict(COMMON, output_dir=str(tmp_path))))
    kwargs = recipe.arguments_kwargs
    assert recipe.tags == {"gaudi.execution_mode": "eager"}
    assert (kwargs["use_lazy_mode"], kwargs["use_hpu_graphs_for_inference"]) == (False, False)
    assert (kwargs["torch_compile"], kwargs["torch_compile_backend"]) == (True, "hpu_backend")


def test_optimum_habanas_cpu_mode_builds_the_real_arguments(monkeypatch, tmp_path):
    """The HPU-only settings switched off through hf_args: GaudiTrainingArguments itself accepts the result."""
    recipe = _recipe(monkeypatch, tmp_path, lazy_env="0", hf_args=CPU_MODE)
    args = recipe.build_arguments()
    assert isinstance(args, GaudiTrainingArguments) and (args.use_habana, args.use_cpu) == (False, True)
    assert args.device.type == "cpu" and args.torch_compile is False and args.gaudi_config_name is None
    assert args.logging_dir == str(tmp_path / "logs")  # not 4.55's timestamped default: a resume matches
