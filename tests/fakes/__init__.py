"""Fakes of what needs silicon, at the lowest layer: Habana's PyTorch bridge (habana_bridge/, on disk), the
media loader's natives (habana_native/), libnvidia-ml and libhlml (native_libs/, C stubs), and torch.cuda.

The vendors' Python (optimum-habana, habana-media-loader, pyhlml, pynvml) runs for real above them.
`install_*` puts modules into sys.modules through pytest's monkeypatch, so they vanish after the test.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace


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


__all__ = ["BRIDGE", "fake_cuda", "install_habana"]
