"""What Gaudi hardware and software is here: device facts from HLML, hl-smi or PyTorch; the training path."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

from ...environment import device_nodes_folder, gaudi_path_override
from ...errors import AcceleratorUnavailable
from ..installed import HABANA_TORCH, module_present, package_version
from ..request_checks import allowed_here
from .arguments import choose_gaudi_path

# Board names as HLML/hl-smi print them (HL-225 = Gaudi2; HL-325/328/338 = Gaudi3 OAM/PCIe/UBB)
HL_BOARD = re.compile(r"hl-?(\d)(\d)\d")


@dataclass(frozen=True)
class GaudiProbe:
    name: str
    count: int
    memory_gb: float | None
    driver: str | None
    source: str  # hlml, hl-smi, habana_frameworks


def installed_gaudi_path() -> str:
    """Which training path this Python environment supports (raises on a broken combination)."""
    import importlib.metadata

    from packaging.requirements import Requirement

    requirement = None
    optimum_version = package_version("optimum-habana")
    for line in (importlib.metadata.requires("optimum-habana") or []) if optimum_version else []:
        parsed = Requirement(line)
        if parsed.name == "transformers" and (parsed.marker is None or parsed.marker.evaluate()):
            requirement = str(parsed.specifier) or None
    return choose_gaudi_path(optimum_version, requirement, package_version("transformers") or "0",
                             gaudi_path_override())


def gaudi_hardware_signs() -> str:
    """What says Gaudi hardware is on this host without Habana's PyTorch: hl-smi, device nodes ('' if none)."""
    dev = device_nodes_folder()
    signs = sorted(str(p) for pattern in ("accel*", "hl[0-9]*") for p in dev.glob(pattern))
    if shutil.which("hl-smi"):
        signs.insert(0, "hl-smi")
    return ", ".join(signs[:3]) + (", ..." if len(signs) > 3 else "")


def gaudi_label(device_name: str) -> str:
    """'GAUDI2' / 'HL-225' -> gaudi2; 'GAUDI3' / 'HL-325L' -> gaudi3; first generation -> gaudi."""
    name = device_name.lower()
    for generation in ("3", "2"):
        if f"gaudi{generation}" in name or f"gaudi {generation}" in name:
            return f"gaudi{generation}"
    board = HL_BOARD.search(name)
    if board and board.group(1) == "3":
        return "gaudi3"
    if board and board.group(1) == "2" and board.group(2) != "0":  # HL-20x is first generation
        return "gaudi2"
    return "gaudi"


def probe_gaudi(requested: str, in_process: bool = True) -> GaudiProbe:
    """Detect Gaudi devices; raise AcceleratorUnavailable with a one-line reason when none.

    HLML and hl-smi open no device. PyTorch does (devices are process-exclusive): a launcher, which
    must leave every device to its ranks, asks it from a short-lived child process instead.
    """
    if not module_present(HABANA_TORCH):
        hardware = gaudi_hardware_signs()
        if hardware:
            raise AcceleratorUnavailable(
                f"accel: {requested} requested and Gaudi hardware is here ({hardware}), but this Python environment "
                f"cannot hold Habana's PyTorch ({HABANA_TORCH} not importable): an environment MLflow builds from "
                "conda.yaml never can; allowed: run in Habana's container with "
                f"`mlflow run . -e train -P accel={requested} --env-manager local`"
            )
        raise AcceleratorUnavailable(
            f"accel: {requested} requested but no Gaudi device is present ({HABANA_TORCH} not "
            f"importable); allowed here: {allowed_here()}"
        )
    errors = []
    for probe in (_probe_hlml, _probe_hl_smi, _probe_torch if in_process else _probe_torch_in_child):
        try:
            found = probe()
        except Exception as exc:  # noqa: BLE001 - try the next source, report all if none works
            errors.append(f"{probe.__name__[7:]}: {type(exc).__name__}: {exc}")
            continue
        if found is not None and found.count > 0:
            return found
    raise AcceleratorUnavailable(
        f"accel: {requested} requested but no Gaudi device is present ({'; '.join(errors) or 'none listed'}); "
        f"allowed here: {allowed_here()}"
    )


def _probe_hlml() -> GaudiProbe | None:
    """The devices this job may use (HABANA_VISIBLE_MODULES's, else the host's): count, first one's facts."""
    if not module_present("pyhlml"):
        return None
    import pyhlml

    from ...samplers.job_devices import job_hlml_handles

    pyhlml.hlmlInit()
    try:
        handles = job_hlml_handles(pyhlml)
        if not handles:
            return GaudiProbe("", 0, None, None, "hlml")
        handle = handles[0][1]
        name = pyhlml.hlmlDeviceGetName(handle)
        memory = pyhlml.hlmlDeviceGetMemoryInfo(handle).total / 2**30
        driver = getattr(pyhlml, "hlmlGetDriverVersion", lambda: None)()
    finally:
        pyhlml.hlmlShutdown()
    return GaudiProbe(_text(name), len(handles), round(memory, 1), _text(driver) or None, "hlml")


def _probe_hl_smi() -> GaudiProbe | None:
    if shutil.which("hl-smi") is None:
        return None
    from ...samplers.hl_smi import run_hl_smi

    rows = [[p.strip() for p in line.split(",")] for line in run_hl_smi("name,memory.total,driver_version").splitlines()
            if line.strip()]
    if not rows:
        return GaudiProbe("", 0, None, None, "hl-smi")
    name, memory_mb, driver = rows[0][:3]
    memory = float(memory_mb.split()[0]) / 1024 if memory_mb.split() else None
    return GaudiProbe(name, len(rows), round(memory, 1) if memory else None, driver or None, "hl-smi")


def _probe_torch() -> GaudiProbe | None:
    import habana_frameworks.torch.hpu as hthpu

    if not hthpu.is_available():
        return GaudiProbe("", 0, None, None, "habana_frameworks")
    return GaudiProbe(hthpu.get_device_name(), hthpu.device_count(), None, None, "habana_frameworks")


def _probe_torch_in_child() -> GaudiProbe | None:
    """The PyTorch probe in a child process: it holds the devices only until it exits."""
    import json
    import subprocess
    import sys

    script = ("import json, habana_frameworks.torch.hpu as h\n"
              "ok = h.is_available()\n"
              "print(json.dumps([h.get_device_name() if ok else '', h.device_count() if ok else 0]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, check=True)
    name, count = json.loads(done.stdout.strip().splitlines()[-1])
    return GaudiProbe(name, count, None, None, "habana_frameworks (child process)")


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")
