"""HLML in tests: the real pyhlml (habana-pyhlml) over hlml_stub.c, a C stand-in for libhlml.so.

pyhlml's LibHLML opens an absolute path, /usr/lib/habanalabs/libhlml.so (its __init__ default), so
neither LD_LIBRARY_PATH nor a soname already loaded can redirect it, and writing there would change
the host (and needs root). The fixture therefore repoints only that default at the compiled stub:
everything above the ctypes calls (library loading, function lookup, return-code checks, the error
classes hlmlInit creates, the ctypes structures) is pyhlml's own. pyhlml keeps its library object in
pyhlml.main._hlmlOBJ, reset to None as in a fresh process.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .build import build
from .config import read_calls, write_config

CONFIG_ENV, LOG_ENV = "FAKE_HLML_CONFIG", "FAKE_HLML_LOG"
MODULE_IDS = (2, 6, 3, 7, 0, 4, 5, 1)  # an HLS-2's index -> module id map as hl-smi prints it: not the identity


@dataclass
class Hpu:
    """One Gaudi device as HLML reports it (bytes, mW, mJ since the driver loaded, %)."""

    name: str = "HL-225"
    module_id: int = 0
    uuid: str = ""
    utilization: int = 87
    memory_utilization: int = 5
    memory_used: int = 40 * 2**30
    memory_total: int = 96 * 2**30
    power_mw: int = 512_000
    energy_mj: int = 5_000_000
    not_supported: set = field(default_factory=set)  # HLML C functions that answer HLML_ERROR_NOT_SUPPORTED

    def fields(self) -> dict:
        return {"name": self.name, "module_id": self.module_id, "uuid": self.uuid, "util": self.utilization,
                "mem_util": self.memory_utilization, "mem_used": self.memory_used, "mem_total": self.memory_total,
                "power_mw": self.power_mw, "energy_mj": self.energy_mj, "unsupported": self.not_supported}


def hpus(count: int = 8, **kwargs) -> list[Hpu]:
    """`count` devices in HLML index order; up to 8 they carry an HLS-2's module ids (index 0 is module 2)."""
    modules = MODULE_IDS if count <= len(MODULE_IDS) else range(count)
    return [Hpu(module_id=modules[i], uuid=f"01P0-HL2080A0-15-TNPS{i:02d}-03-07-04", **kwargs) for i in range(count)]


class HlmlStub:
    """One test's Gaudi host: `hpus` (HLML order), rewritten to the stub's table by `write`."""

    def __init__(self, monkeypatch, folder: Path, library: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.monkeypatch, self.library = monkeypatch, library
        self.config, self.log, self.missing = folder / "hlml.conf", folder / "hlml.calls", folder / "absent/libhlml.so"
        self.hpus, self.driver, self.init_error = hpus(8), "1.24.0-a2a5f9c", None
        self.write()

    def set(self, hpus: list[Hpu] | None = None, driver: str | None = None, init_error: int | None = None):
        self.hpus = self.hpus if hpus is None else list(hpus)
        self.driver, self.init_error = driver or self.driver, init_error
        self.write()
        return self

    def write(self) -> None:
        write_config(self.config, {"driver": self.driver, "init_error": self.init_error},
                     [h.fields() for h in self.hpus])

    def remove_library(self) -> None:
        """pyhlml installed, libhlml.so not: LibHLML's CDLL fails as on a host without Habana's driver stack."""
        from pyhlml import hlml_lib

        self.monkeypatch.setattr(hlml_lib.LibHLML.__init__, "__defaults__", (str(self.missing),))

    def calls(self) -> list[str]:
        return read_calls(self.log)


@pytest.fixture
def hlml_stub(monkeypatch, tmp_path):
    """The real pyhlml over the stub, an 8-device HLS-2 (HL-225) by default; HABANA_VISIBLE_MODULES unset."""
    from pyhlml import hlml_lib, main

    library = build("hlml")
    controller = HlmlStub(monkeypatch, tmp_path / "hlml-stub", library)
    monkeypatch.setattr(hlml_lib.LibHLML.__init__, "__defaults__", (str(library),))
    monkeypatch.setattr(main, "_hlmlOBJ", None)
    monkeypatch.setenv(CONFIG_ENV, str(controller.config))
    monkeypatch.setenv(LOG_ENV, str(controller.log))
    monkeypatch.delenv("HABANA_VISIBLE_MODULES", raising=False)
    stub = ctypes.CDLL(str(library))
    stub.fake_hlml_reset()
    yield controller
    stub.fake_hlml_reset()
