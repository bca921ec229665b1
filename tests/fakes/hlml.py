"""A fake of habana-pyhlml 1.24.2.481 (module `pyhlml`) that behaves like the real one.

Read from the wheel (pyhlml/main.py, hlml_error.py, pyhlml_types_generated.py): handles are opaque
ctypes pointers, names and the driver version are bytes, utilization and memory are ctypes
structures (float() of one raises, as the real struct does), memory is in bytes, power in mW,
energy in mJ since the driver loaded. Errors are HLMLError subclasses created by hlmlInit; without
libhlml.so, hlmlInit prints "Failed to load libhlml" and raises HLMLError_Uninitialized (value 1),
and any later call (hlmlShutdown too) raises AttributeError on the missing library object.
"""

from __future__ import annotations

import ctypes

from . import _module

UNINITIALIZED, NOT_SUPPORTED = 1, 3
ERROR_NAMES = {1: "Uninitialized", 2: "InvalidArgument", 3: "NotSupported", 6: "NotFound", 49: "Unknown"}


class HLMLError(Exception):
    _cMap: dict = {}

    def __new__(cls, value):
        if cls is HLMLError:
            cls = HLMLError._cMap.get(value, cls)
        error = Exception.__new__(cls)
        error.value = value
        return error

    def __init__(self, value):
        super().__init__(value)

    def __str__(self):
        return f"HLML Error with code {self.value}"


def _errors_as_classes() -> dict:
    """hlml_error.ErrorsAsClass: fresh subclasses on every hlmlInit, as upstream rebinds them."""
    classes = {}
    for value, name in ERROR_NAMES.items():
        subclass = type(f"HLMLError_{name}", (HLMLError,), {})
        HLMLError._cMap[value] = subclass
        classes[subclass.__name__] = subclass
    return classes


class c_hlml_utilization(ctypes.Structure):  # noqa: N801 - upstream's name
    _fields_ = [("aip", ctypes.c_uint), ("memory", ctypes.c_uint)]


class c_hlml_memory(ctypes.Structure):  # noqa: N801 - upstream's name
    _fields_ = [("free", ctypes.c_ulonglong), ("total", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def install_pyhlml(monkeypatch, name=b"HL-225", count=8, util=87, used=40 * 2**30, total=96 * 2**30,
                   power_mw=512000, library=True, energy_mj=None, not_supported=()):
    """pyhlml in sys.modules; `energy_mj(index)` gives the energy counter, `not_supported` names calls that fail."""
    state = {"lib": None, "calls": []}
    handles = [ctypes.c_void_p(0x1000 + i) for i in range(count)]
    module = _module(monkeypatch, "pyhlml", HLMLError=HLMLError)
    errors = _module(monkeypatch, "pyhlml.hlml_error", HLMLError=HLMLError)

    def library_call(function):
        def call(*args):
            if state["lib"] is None:
                raise AttributeError("'NoneType' object has no attribute 'get_func_ptr'")
            if function.__name__ in not_supported:
                raise HLMLError(NOT_SUPPORTED)
            return function(*args)
        call.__name__ = function.__name__
        return call

    def hlmlInit():
        for key, value in _errors_as_classes().items():
            setattr(errors, key, value)
        if not library:
            print("Failed to load libhlml")
            raise HLMLError(UNINITIALIZED)
        state["lib"] = object()
        state["calls"].append("init")

    def index_of(handle):
        return next(i for i, h in enumerate(handles) if h is handle)

    def hlmlShutdown():
        state["calls"].append("shutdown")

    def hlmlDeviceGetCount():
        return count

    def hlmlDeviceGetHandleByIndex(index):
        return handles[index]

    def hlmlDeviceGetName(handle):
        return name

    def hlmlDeviceGetUtilizationRates(handle):
        return c_hlml_utilization(util + index_of(handle), 5)

    def hlmlDeviceGetMemoryInfo(handle):
        return c_hlml_memory(total - used, total, used)

    def hlmlDeviceGetPowerUsage(handle):
        return power_mw

    def hlmlDeviceGetTotalEnergyConsumption(handle):
        if energy_mj is None:
            raise HLMLError(NOT_SUPPORTED)
        return int(energy_mj(index_of(handle)))

    def hlmlGetDriverVersion():
        return b"1.24.0-a2a5f9c"

    functions = {f.__name__: library_call(f) for f in (
        hlmlShutdown, hlmlDeviceGetCount, hlmlDeviceGetHandleByIndex, hlmlDeviceGetName,
        hlmlDeviceGetUtilizationRates, hlmlDeviceGetMemoryInfo, hlmlDeviceGetPowerUsage,
        hlmlDeviceGetTotalEnergyConsumption, hlmlGetDriverVersion)}
    for key, value in {"hlmlInit": hlmlInit, **functions}.items():
        setattr(module, key, value)
    module.calls = state["calls"]
    return module
