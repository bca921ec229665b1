"""NVML in tests: the real pynvml (nvidia-ml-py) over nvml_stub.c, a C stand-in for libnvidia-ml.so.1.

pynvml loads the library with CDLL("libnvidia-ml.so.1"), a bare soname. The fixture loads the stub
first by its full path; it carries that soname, so the dynamic loader hands pynvml the object already
in the process. A child process finds it through LD_LIBRARY_PATH instead (`NvmlStub.env`). pynvml
keeps the library, its function pointers and its init count in module globals, which the fixture
resets to what a fresh process has. A loaded library cannot be unloaded: after the test the stub
stays, with no table, so a later nvmlInit in this process answers NVML_ERROR_DRIVER_NOT_LOADED.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .build import SONAMES, build
from .config import read_calls, write_config

CONFIG_ENV, LOG_ENV = "FAKE_NVML_CONFIG", "FAKE_NVML_LOG"
# What a MIG device handle refuses: utilization is documented as unsupported on MIG; power, energy,
# clocks and temperature belong to the whole board, which nvidia-smi reports only for the parent GPU
MIG_REFUSES = frozenset({"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
                         "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetClockInfo", "nvmlDeviceGetTemperature"})


@dataclass
class Gpu:
    """One GPU as NVML reports it (bytes, mW, mJ since the driver loaded, MHz, °C, %)."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = ""
    utilization: int = 90
    memory_utilization: int = 42
    memory_used: int = 30 * 10**9
    memory_total: int = 80 * 10**9
    power_mw: int = 350_000
    power_limit_mw: int = 700_000
    energy_mj: int = 1_000_000
    clock_mhz: int = 1980
    temperature: int = 61
    not_supported: set = field(default_factory=set)  # NVML C functions that answer NVML_ERROR_NOT_SUPPORTED

    def fields(self) -> dict:
        return {"name": self.name, "uuid": self.uuid, "util": self.utilization, "mem_util": self.memory_utilization,
                "mem_used": self.memory_used, "mem_total": self.memory_total, "power_mw": self.power_mw,
                "power_limit_mw": self.power_limit_mw, "energy_mj": self.energy_mj, "clock_mhz": self.clock_mhz,
                "mem_clock_mhz": 2619, "temperature": self.temperature, "unsupported": self.not_supported}


@dataclass
class Mig:
    """A MIG device of the GPU at NVML index `parent`; `index` is its MIG index inside that GPU."""

    uuid: str
    parent: int
    index: int = 0
    name: str = "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    memory_used: int = 2 * 10**9
    memory_total: int = 10 * 10**9
    not_supported: set = field(default_factory=lambda: set(MIG_REFUSES))

    def fields(self) -> dict:
        return {"name": self.name, "uuid": self.uuid, "parent": self.parent, "index": self.index,
                "mem_used": self.memory_used, "mem_total": self.memory_total, "unsupported": self.not_supported}


def gpus(count: int = 2, **kwargs) -> list[Gpu]:
    """`count` GPUs in NVML (PCI) order with distinct UUIDs."""
    return [Gpu(uuid=f"GPU-{i:08x}-aaaa-bbbb-cccc-dddddddddddd", **kwargs) for i in range(count)]


class NvmlStub:
    """One test's NVML host: `gpus` and `migs` (NVML order), rewritten to the stub's table by `write`."""

    def __init__(self, folder: Path, library: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.library, self.config, self.log = library, folder / "nvml.conf", folder / "nvml.calls"
        self.gpus, self.migs, self.driver, self.init_error = gpus(2), [], "570.86.15", None
        self.write()

    def set(self, gpus: list[Gpu] | None = None, migs: list[Mig] | None = None, driver: str | None = None,
            init_error: int | None = None) -> NvmlStub:
        """Replace what is given; `init_error` is the code nvmlInit answers (e.g. 9, driver not loaded)."""
        self.gpus = self.gpus if gpus is None else list(gpus)
        self.migs = self.migs if migs is None else list(migs)
        self.driver, self.init_error = driver or self.driver, init_error
        self.write()
        return self

    def write(self) -> None:
        write_config(self.config, {"driver": self.driver, "init_error": self.init_error},
                     [g.fields() for g in self.gpus], [m.fields() for m in self.migs])

    def calls(self) -> list[str]:
        return read_calls(self.log)

    def env(self) -> dict[str, str]:
        """The environment of a child process that loads this stub by soname and reads this table."""
        paths = [str(self.library.parent), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]
        return {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(paths), CONFIG_ENV: str(self.config),
                LOG_ENV: str(self.log)}


@pytest.fixture
def nvml_stub(monkeypatch, tmp_path):
    """The real pynvml over the stub, two H100s by default; CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER unset."""
    import pynvml

    library = build("nvml")
    stub = ctypes.CDLL(str(library))
    if not hasattr(ctypes.CDLL(SONAMES["nvml"]), "fake_nvml_reset"):
        pytest.skip("a real libnvidia-ml.so.1 was loaded into this process first; the stub cannot stand in")
    controller = NvmlStub(tmp_path / "nvml-stub", library)
    monkeypatch.setenv(CONFIG_ENV, str(controller.config))
    monkeypatch.setenv(LOG_ENV, str(controller.log))
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pynvml, "nvmlLib", None)
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
    monkeypatch.setattr(pynvml, "_nvmlLib_refcount", 0)
    stub.fake_nvml_reset()
    yield controller
    stub.fake_nvml_reset()
