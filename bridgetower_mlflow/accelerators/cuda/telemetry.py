"""NVIDIA telemetry MLflow's own GPU monitor lacks: clocks, temperature, memory-bus use, the energy counter.

NVML numbers GPUs in PCI order and ignores CUDA_VISIBLE_DEVICES; CUDA numbers them in its own order
(FASTEST_FIRST unless CUDA_DEVICE_ORDER=PCI_BUS_ID) and takes UUIDs or MIG ids there. Each CUDA
device this process sees is found in NVML by its UUID; metrics are named by NVML index, as
MLflow's GPU metrics are. Every NVML call fails on its own (MIG and vGPU refuse some).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

from ..base import DeviceSampler

log = logging.getLogger(__name__)


def _uuid_handle(nvml, uuid: str):
    candidates = [uuid] if uuid.startswith(("GPU-", "MIG-")) else [f"GPU-{uuid}", f"MIG-{uuid}"]
    for candidate in candidates:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(candidate)
        except nvml.NVMLError:
            continue
    return None


def _cuda_uuids(count: int) -> list[str]:
    """The UUIDs of CUDA devices 0..count-1 as torch sees them (after CUDA_VISIBLE_DEVICES)."""
    try:
        import torch

        if torch.cuda.is_available():
            return [str(torch.cuda.get_device_properties(i).uuid) for i in range(min(count, torch.cuda.device_count()))]
    except Exception as exc:  # noqa: BLE001 - fall back to what the environment says
        log.debug("no CUDA UUIDs from torch: %s", exc)
    return []


def visible_handles(nvml, count: int) -> list[tuple[int, object]]:
    """(NVML index, handle) of the first `count` GPUs this process uses, in CUDA order."""
    found = [h for h in (_uuid_handle(nvml, u) for u in _cuda_uuids(count)) if h is not None]
    if not found:
        visible = [p.strip() for p in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if p.strip()]
        for entry in visible or [str(i) for i in range(count)]:
            handle = nvml.nvmlDeviceGetHandleByIndex(int(entry)) if entry.isdigit() else _uuid_handle(nvml, entry)
            if handle is not None:
                found.append(handle)
        if visible and any(p.isdigit() for p in visible) and os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            log.warning("GPU telemetry: CUDA_VISIBLE_DEVICES ordinals read as NVML (PCI) indices; "
                        "set CUDA_DEVICE_ORDER=PCI_BUS_ID so both orders agree")
    return [(nvml.nvmlDeviceGetIndex(h), h) for h in found[:count]]


class NvmlSampler(DeviceSampler):
    """Per GPU: SM clock, temperature, memory-bus utilization; each call may fail alone."""

    def __init__(self, count: int):
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handles = visible_handles(pynvml, count)
        self._unsupported: set[tuple[int, str]] = set()

    def _read(self, index: int, name: str, call):
        if (index, name) in self._unsupported:
            return None
        try:
            return float(call())
        except self._nvml.NVMLError as exc:
            self._unsupported.add((index, name))
            log.warning("GPU %d: %s unavailable (%s); the other GPU metrics go on", index, name, exc)
            return None

    def sample(self) -> dict[str, float]:
        nvml, metrics = self._nvml, {}
        for index, handle in self._handles:
            readings = {
                "sm_clock_mhz": lambda h=handle: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
                "temperature_celsius": lambda h=handle: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
                "memory_bandwidth_utilization_percentage":
                    lambda h=handle: nvml.nvmlDeviceGetUtilizationRates(h).memory,
            }
            for name, call in readings.items():
                value = self._read(index, name, call)
                if value is not None:
                    metrics[f"gpu_{index}_{name}"] = value
        return metrics

    def energy_joules(self) -> float | None:
        """Total energy of these GPUs since their driver loaded (NVML, mJ; Volta and newer), or None."""
        try:
            return sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) for _, h in self._handles) / 1000.0
        except self._nvml.NVMLError:
            return None

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutdown of a telemetry library must never fail a run
            pass


def nvidia_driver_version() -> str | None:
    """The driver version from NVML, else nvidia-smi, else None."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - NVML absent or failing: try the CLI
        pass
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0].strip() if out.strip() else None
