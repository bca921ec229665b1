"""Contract: every keyword the Gaudi adapter passes exists in optimum-habana 1.21.2 (read as source).

`import optimum.habana` needs a Habana install, so the wheel's source is parsed with `ast` instead.
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bridgetower_mlflow.accelerators.base import RecipeSettings
from bridgetower_mlflow.accelerators.gaudi.arguments import (
    HABANA_CLIP_CONFIG,
    gaudi_config_overrides,
    gaudi_training_kwargs,
)

VERSION = "1.21.2"
CACHE = Path.home() / ".cache" / "bridgetower-mlflow" / "wheels"
COMMON = {"output_dir": "out", "per_device_train_batch_size": 48, "per_device_eval_batch_size": 16,
          "learning_rate": 1e-5, "num_train_epochs": 5.0, "max_steps": -1, "seed": 42,
          "dataloader_num_workers": 1, "logging_steps": 10, "save_strategy": "no", "eval_strategy": "no",
          "report_to": "none", "remove_unused_columns": False, "adam_epsilon": 1e-8, "disable_tqdm": True,
          "dataloader_drop_last": False}


@pytest.fixture(scope="module")
def wheel() -> zipfile.ZipFile:
    found = sorted(CACHE.glob(f"optimum_habana-{VERSION}-*.whl"))
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        result = subprocess.run([sys.executable, "-m", "pip", "download", f"optimum-habana=={VERSION}", "--no-deps",
                                 "-d", str(CACHE)], capture_output=True, text=True, timeout=300)
        found = sorted(CACHE.glob(f"optimum_habana-{VERSION}-*.whl"))
        if not found:
            pytest.skip(f"optimum-habana {VERSION} wheel not downloadable here: {result.stderr.strip()[-200:]}")
    return zipfile.ZipFile(found[0])


def _class(wheel, path: str, name: str) -> ast.ClassDef:
    tree = ast.parse(wheel.read(path).decode())
    return next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == name)


def _dataclass_fields(cls: ast.ClassDef) -> dict[str, ast.AnnAssign]:
    return {n.target.id: n for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def _study_kwargs(strategy: str = "ddp") -> dict:
    settings = RecipeSettings(COMMON, distribution_strategy=strategy, world_size=8)
    return gaudi_training_kwargs(COMMON, settings, gaudi_config_name="Habana/clip", strategies={"ddp", "fast_ddp"})


def test_gaudi_training_arguments_accept_every_keyword(wheel):
    gaudi_fields = _dataclass_fields(_class(wheel, "optimum/habana/transformers/training_args.py",
                                            "GaudiTrainingArguments"))
    from transformers import TrainingArguments

    base_fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    kwargs = _study_kwargs()
    ours = {"use_habana", "use_lazy_mode", "use_hpu_graphs_for_inference", "gaudi_config_name",
            "throughput_warmup_steps", "sdp_on_bf16", "distribution_strategy"}
    assert ours <= set(kwargs) and ours <= set(gaudi_fields)
    assert set(kwargs) - set(gaudi_fields) <= base_fields  # the rest are plain TrainingArguments fields
    assert not {"tf32", "fp16", "use_cpu"} & set(kwargs)  # rejected by GaudiTrainingArguments


def test_fast_ddp_is_a_choice_in_this_version(wheel):
    source = wheel.read("optimum/habana/transformers/training_args.py").decode()
    field = _dataclass_fields(_class(wheel, "optimum/habana/transformers/training_args.py",
                                     "GaudiTrainingArguments"))["distribution_strategy"]
    assert '"fast_ddp"' in ast.get_source_segment(source, field)
    assert _study_kwargs("fast_ddp")["distribution_strategy"] == "fast_ddp"


def test_gaudi_config_keywords_exist(wheel):
    init = next(n for n in _class(wheel, "optimum/habana/transformers/gaudi_configuration.py", "GaudiConfig").body
                if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    popped = {call.args[0].value for call in ast.walk(init) if isinstance(call, ast.Call)
              and isinstance(call.func, ast.Attribute) and call.func.attr == "pop" and call.args
              and isinstance(call.args[0], ast.Constant)}
    assert set(HABANA_CLIP_CONFIG) <= popped
    assert set(gaudi_config_overrides("fp32")) <= popped
    # the recipe logs the config with to_dict(): GaudiConfig is optimum's BaseConfig, a PretrainedConfig
    cls = _class(wheel, "optimum/habana/transformers/gaudi_configuration.py", "GaudiConfig")
    assert [base.id for base in cls.bases] == ["BaseConfig"]


def test_gaudi_trainer_takes_gaudi_config(wheel):
    init = next(n for n in _class(wheel, "optimum/habana/transformers/trainer.py", "GaudiTrainer").body
                if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert "gaudi_config" in [a.arg for a in init.args.args]


def test_package_exports_what_the_adapter_imports(wheel):
    init = wheel.read("optimum/habana/__init__.py").decode() + wheel.read(
        "optimum/habana/transformers/__init__.py").decode()
    for name in ("GaudiTrainingArguments", "GaudiTrainer", "GaudiConfig"):
        assert name in init
