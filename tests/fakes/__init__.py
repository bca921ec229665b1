"""Fakes of vendor modules (habana_frameworks, optimum.habana, pyhlml, pynvml) and of torch.cuda.

Each `install_*` puts modules into sys.modules through pytest's monkeypatch, so they vanish after
the test. They mimic the documented call shapes, not the hardware.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace


def _module(monkeypatch, name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__path__ = []
    for key, value in attrs.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)
    parent, _, child = name.rpartition(".")
    if parent and parent in sys.modules:
        monkeypatch.setattr(sys.modules[parent], child, module, raising=False)
    return module


def fake_cuda(monkeypatch, names=("NVIDIA H100 80GB HBM3",), memory_gb=80, capability=(9, 0), bf16=True,
              uuids=None):
    """Make torch.cuda report the given GPUs; `uuids` are what torch prints for each (no GPU- prefix)."""
    import torch

    uuids = uuids or [f"{i:08x}-aaaa-bbbb-cccc-dddddddddddd" for i in range(len(names))]
    props = [SimpleNamespace(total_memory=int(memory_gb * 2**30), major=capability[0], minor=capability[1],
                             uuid=uuid) for uuid in uuids]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(names))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: names[i])
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props[i])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(torch.version, "cuda", "12.8")


BRIDGE = Path(__file__).parent / "habana_bridge"  # the on-disk fake of Habana's PyTorch bridge
BRIDGE_MODULES = ("habana_frameworks", "habana_frameworks._record", "habana_frameworks.autoload",
                  "habana_frameworks.torch.utils", "habana_frameworks.torch.utils.internal", "habana_frameworks.torch",
                  "habana_frameworks.torch.core", "habana_frameworks.torch.hpu", "habana_frameworks.torch._hpu_C",
                  "habana_frameworks.torch.utils.experimental", "habana_frameworks.torch.media_pyt_bridge")


def install_habana(monkeypatch, name="GAUDI2", count=8, available=True, lazy_env=None, record=None):
    """The fake bridge in this process, freshly loaded, as `import torch` would have loaded it with `lazy_env`."""
    import importlib.util

    monkeypatch.setenv("FAKE_HPU_COUNT", str(count if available else 0))
    monkeypatch.setenv("FAKE_HPU_NAME", name)
    if record:
        monkeypatch.setenv("FAKE_HPU_RECORD", str(record))
    if lazy_env is None:
        monkeypatch.delenv("PT_HPU_LAZY_MODE", raising=False)
    else:
        monkeypatch.setenv("PT_HPU_LAZY_MODE", lazy_env)
    loaded = {}
    for module_name in BRIDGE_MODULES:
        parts = module_name.split(".")
        folder = BRIDGE.joinpath(*parts)
        path = folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")
        spec = importlib.util.spec_from_file_location(module_name, path, submodule_search_locations=[str(folder)]
                                                      if folder.is_dir() else None)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, module_name, module)
        spec.loader.exec_module(module)
        parent = module_name.rpartition(".")[0]
        if parent in loaded:
            setattr(loaded[parent], parts[-1], module)
        loaded[module_name] = module
    return loaded["habana_frameworks.torch.core"]


@dataclass
class FakeGaudiTrainingArguments:
    """Field names as optimum-habana 1.21.2; keeps whatever it is given."""

    output_dir: str = "out"
    per_device_train_batch_size: int = 8
    report_to: str = "all"
    remove_unused_columns: bool = True
    adam_epsilon: float = 1e-6
    use_habana: bool = False
    use_lazy_mode: bool = True
    use_hpu_graphs_for_inference: bool = False
    gaudi_config_name: str | None = None
    throughput_warmup_steps: int = 0
    sdp_on_bf16: bool = False
    bf16: bool = False
    ddp_backend: str | None = None
    distribution_strategy: str = field(default="ddp", metadata={"choices": ["ddp", "fast_ddp"]})
    torch_compile: bool = False  # TrainingArguments' own fields, inherited by GaudiTrainingArguments
    torch_compile_backend: str | None = None
    extra: dict = field(default_factory=dict)


class FakeGaudiConfig:
    loaded: list = []

    def __init__(self, **kwargs):
        self.use_torch_autocast = kwargs.pop("use_torch_autocast", False)
        self.use_fused_adam = kwargs.pop("use_fused_adam", False)
        self.use_fused_clip_norm = kwargs.pop("use_fused_clip_norm", False)

    @classmethod
    def from_pretrained(cls, name):
        cls.loaded.append(name)
        if name == "Habana/clip" and getattr(cls, "offline", False):
            raise OSError("We couldn't connect to 'https://huggingface.co'")
        return cls(use_torch_autocast=True, use_fused_adam=True, use_fused_clip_norm=True)

    def to_dict(self):  # optimum's BaseConfig (a PretrainedConfig) has it
        return dict(vars(self))

    def save_pretrained(self, folder):
        import json
        from pathlib import Path

        Path(folder, "gaudi_config.json").write_text(json.dumps(vars(self)))


def install_optimum_habana(monkeypatch, args_class=FakeGaudiTrainingArguments, offline=False):
    class FakeGaudiTrainer:
        pass

    FakeGaudiConfig.loaded = []
    FakeGaudiConfig.offline = offline
    _module(monkeypatch, "optimum")
    return _module(monkeypatch, "optimum.habana", GaudiTrainingArguments=args_class,
                   GaudiConfig=FakeGaudiConfig, GaudiTrainer=FakeGaudiTrainer)


__all__ = ["FakeGaudiConfig", "FakeGaudiTrainingArguments", "fake_cuda", "install_habana", "install_optimum_habana"]
