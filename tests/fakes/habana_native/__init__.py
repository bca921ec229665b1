"""Fakes of the native layer under habana-media-loader's Python: its pybind modules and libmedia.so.

Habana installs the pybind modules top-level (`import media_pipe_types`), so this folder is a
sys.path entry; the real habana_frameworks.mediapipe from site-packages runs on top of them, and on
the fake PyTorch bridge (tests/fakes/habana_bridge) for the iterator's device tensors.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

NATIVE = Path(__file__).parent
NATIVE_MODULES = ("media_pipe_types", "media_pipe_params", "media_pipe_api", "media_pipe_proxy", "media_pipe_nodes",
                  "media_pipe_randomizer", "media_numpy_reader", "media_random_biased_crop", "media_resize",
                  "media_random_flip_cpu", "libmedia")
LOADER_PACKAGES = ("habana_frameworks.mediapipe", "habana_frameworks.medialoaders")


def purge_media_modules() -> None:
    """Forget the media loader and its natives, so the next import binds them afresh."""
    for name in [n for n in sys.modules if n in NATIVE_MODULES or n.startswith(LOADER_PACKAGES)]:
        del sys.modules[name]


class _CDLL(ctypes.CDLL):
    """ctypes.CDLL, except that libmedia.so is the fake (backend/legacy.py loads it at import)."""

    def __new__(cls, name, *args, **kwargs):
        if name == "libmedia.so":
            import libmedia

            return libmedia.LIBRARY
        return super().__new__(cls)


def install_media_natives(monkeypatch, libmedia: bool = True) -> None:
    """The natives importable and, unless `libmedia=False`, libmedia.so loadable; the media loader imported afresh."""
    purge_media_modules()
    monkeypatch.syspath_prepend(str(NATIVE))
    if libmedia:
        monkeypatch.setattr(ctypes, "CDLL", _CDLL)


def install_media_stack(monkeypatch, **bridge):
    """The natives and the fake bridge (`bridge` goes to install_habana; count=0: no device).

    torch.hpu is the bridge's hpu module, as habana_frameworks.torch registers it
    (torch._register_device_module), for this test only.
    """
    import torch

    from .. import install_habana

    install_media_natives(monkeypatch)
    install_habana(monkeypatch, **bridge)
    hpu, native = sys.modules["habana_frameworks.torch.hpu"], sys.modules["habana_frameworks.torch._hpu_C"]
    for name in ("init", "_lazy_init"):  # the real hpu module has them (from _hpu_C); the fake hpu.py does not yet
        if not hasattr(hpu, name):
            monkeypatch.setattr(hpu, name, getattr(native, name), raising=False)
    monkeypatch.setitem(sys.modules, "torch.hpu", hpu)
    monkeypatch.setattr(torch, "hpu", hpu, raising=False)
