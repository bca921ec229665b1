"""A fake of nvidia-ml-py 13.615 (module `pynvml`) that behaves like the real one.

Read from the wheel (pynvml.py): handles are opaque structure pointers; names, UUIDs, PCI bus ids
and the driver version come back as str; NVML indices are PCI order, whatever CUDA_VISIBLE_DEVICES
says; GetHandleByUUID takes GPU-... and MIG-... UUIDs; any call can raise NVMLError_NotSupported on
its own (MIG, vGPU, pre-Volta energy); NVMLError(value) returns the subclass for its code.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace

from . import _module

NOT_SUPPORTED, NOT_FOUND, LIBRARY_NOT_FOUND = 3, 6, 12


class NVMLError(Exception):
    _valClassMapping: dict = {}

    def __new__(cls, value):
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        error = Exception.__new__(cls)
        error.value = value
        return error

    def __init__(self, value):
        super().__init__(value)

    def __str__(self):
        known = {NOT_SUPPORTED: "Not Supported", NOT_FOUND: "Not Found",
                 LIBRARY_NOT_FOUND: "NVML Shared Library Not Found"}
        return known.get(self.value, f"NVML Error with code {self.value}")


def _subclass(name: str, value: int):
    cls = type(f"NVMLError_{name}", (NVMLError,), {"__new__": lambda c, *a: NVMLError.__new__(c, value)})
    NVMLError._valClassMapping[value] = cls
    return cls


NVMLError_NotSupported = _subclass("NotSupported", NOT_SUPPORTED)
NVMLError_NotFound = _subclass("NotFound", NOT_FOUND)
NVMLError_LibraryNotFound = _subclass("LibraryNotFound", LIBRARY_NOT_FOUND)


class c_nvmlDevice_t(ctypes.c_void_p):  # noqa: N801 - upstream's name
    pass


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = ""
    bus_id: str = ""
    clock_mhz: int = 1980
    temperature: int = 61
    utilization: int = 90
    memory_utilization: int = 42
    used_bytes: int = 30 * 10**9
    total_bytes: int = 80 * 10**9
    power_mw: int = 350000
    energy_mj: int | None = 1_000_000
    not_supported: set = field(default_factory=set)  # names of calls that raise NotSupported on this GPU


def gpus(count: int = 2, **kwargs) -> list[FakeGpu]:
    return [FakeGpu(uuid=f"GPU-{i:08x}-aaaa-bbbb-cccc-dddddddddddd", bus_id=f"00000000:{0x1B + i:02X}:00.0", **kwargs)
            for i in range(count)]


def install_pynvml(monkeypatch, devices: list[FakeGpu] | None = None, driver="570.86.15", library=True):
    """pynvml in sys.modules with `devices` in NVML (PCI) order."""
    devices = devices if devices is not None else gpus(2)
    handles = [c_nvmlDevice_t(0x2000 + i) for i in range(len(devices))]
    state = {"initialized": 0}

    def check(call, handle):
        if not state["initialized"]:
            raise NVMLError(1)
        gpu = devices[next(i for i, h in enumerate(handles) if h is handle)]
        if call in gpu.not_supported:
            raise NVMLError(NOT_SUPPORTED)
        return gpu

    def init():
        if not library:
            raise NVMLError(LIBRARY_NOT_FOUND)
        state["initialized"] += 1

    def by(attribute):
        def find(value):
            if not state["initialized"]:
                raise NVMLError(1)
            for handle, gpu in zip(handles, devices):
                if getattr(gpu, attribute) == value:
                    return handle
            raise NVMLError(NOT_FOUND)
        return find

    return _module(
        monkeypatch, "pynvml", NVMLError=NVMLError, NVMLError_NotSupported=NVMLError_NotSupported,
        NVMLError_NotFound=NVMLError_NotFound, NVML_CLOCK_SM=1, NVML_TEMPERATURE_GPU=0,
        nvmlInit=init, nvmlShutdown=lambda: state.update(initialized=max(state["initialized"] - 1, 0)),
        nvmlSystemGetDriverVersion=lambda: driver,
        nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=lambda i: handles[i],
        nvmlDeviceGetHandleByUUID=by("uuid"),
        nvmlDeviceGetHandleByPciBusId=by("bus_id"),
        nvmlDeviceGetIndex=lambda h: handles.index(h),
        nvmlDeviceGetName=lambda h: check("name", h).name,
        nvmlDeviceGetUUID=lambda h: check("uuid", h).uuid,
        nvmlDeviceGetClockInfo=lambda h, kind: check("clock", h).clock_mhz,
        nvmlDeviceGetTemperature=lambda h, sensor: check("temperature", h).temperature,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=check("utilization", h).utilization,
                                                                memory=check("utilization", h).memory_utilization),
        nvmlDeviceGetMemoryInfo=lambda h: _memory(check("memory", h)),
        nvmlDeviceGetPowerUsage=lambda h: check("power", h).power_mw,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700000,
        nvmlDeviceGetTotalEnergyConsumption=lambda h: _energy(check("energy", h)),
    )


def _memory(gpu: FakeGpu):
    return SimpleNamespace(used=gpu.used_bytes, total=gpu.total_bytes, free=gpu.total_bytes - gpu.used_bytes)


def _energy(gpu: FakeGpu) -> int:
    if gpu.energy_mj is None:
        raise NVMLError(NOT_SUPPORTED)
    return gpu.energy_mj
