"""Fakes of vendor modules (habana_frameworks, optimum.habana, pyhlml, pynvml) and of torch.cuda.

Each `install_*` puts modules into sys.modules through pytest's monkeypatch, so they vanish after
the test. They mimic the documented call shapes, not the hardware.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from dataclasses import dataclass, field
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


def fake_cuda(monkeypatch, names=("NVIDIA H100 80GB HBM3",), memory_gb=80, capability=(9, 0), bf16=True):
    """Make torch.cuda report the given GPUs."""
    import torch

    props = SimpleNamespace(total_memory=int(memory_gb * 2**30), major=capability[0], minor=capability[1])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(names))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: names[i])
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(torch.version, "cuda", "12.8")


def install_pynvml(monkeypatch, driver=b"570.86.15", clock=1980, temperature=61, memory_util=42):
    handles = {}
    return _module(
        monkeypatch, "pynvml", NVML_CLOCK_SM=1, NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: driver,
        nvmlDeviceGetHandleByIndex=lambda i: handles.setdefault(i, f"gpu{i}"),
        nvmlDeviceGetClockInfo=lambda h, kind: clock,
        nvmlDeviceGetTemperature=lambda h, sensor: temperature,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=90, memory=memory_util),
    )


def install_pyhlml(monkeypatch, name=b"HL-225", count=8, util=87, used=40 * 2**30, total=96 * 2**30, power_mw=512000):
    calls = []
    return _module(
        monkeypatch, "pyhlml", calls=calls,
        hlmlInit=lambda: calls.append("init"), hlmlShutdown=lambda: calls.append("shutdown"),
        hlmlDeviceGetCount=lambda: count,
        hlmlDeviceGetHandleByIndex=lambda i: i,
        hlmlDeviceGetName=lambda h: name,
        hlmlDeviceGetUtilizationRates=lambda h: util + h,
        hlmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=used, total=total, free=total - used),
        hlmlDeviceGetPowerUsage=lambda h: power_mw,
    )


def install_habana(monkeypatch, name="GAUDI2", count=8, available=True):
    """habana_frameworks + habana_frameworks.torch.hpu with a device list."""
    state = SimpleNamespace(synchronized=0)
    hpu = SimpleNamespace(
        is_available=lambda: available, device_count=lambda: count if available else 0,
        get_device_name=lambda: name, max_memory_allocated=lambda: 3 * 2**30,
        synchronize=lambda: setattr(state, "synchronized", state.synchronized + 1),
    )
    _module(monkeypatch, "habana_frameworks")
    _module(monkeypatch, "habana_frameworks.torch")
    _module(monkeypatch, "habana_frameworks.torch.hpu", **vars(hpu))
    return state


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
