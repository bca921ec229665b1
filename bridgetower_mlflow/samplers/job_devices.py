"""Which of the host's devices are this job's, as NVML and HLML handles.

NVML and HLML list every device on the host and read neither CUDA_VISIBLE_DEVICES nor
HABANA_VISIBLE_MODULES; CUDA and Habana's runtime do. NVML numbers GPUs in PCI order, CUDA in its own
(FASTEST_FIRST unless CUDA_DEVICE_ORDER=PCI_BUS_ID) and takes ordinals, GPU- and MIG- UUIDs. A job
device is named by its NVML index; a MIG device by its parent GPU's, since NVML's index of a MIG
device is its place inside that GPU. HLML devices are picked by module id (hl-smi's `module_id`,
not its `index`) and named by HLML index, as hl-smi's `index` column. The binding module (pynvml,
pyhlml) is passed in, already initialized.
"""

from __future__ import annotations

import logging

from ..environment import cuda_pci_order, cuda_visible_devices, habana_visible_modules

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


def _environment_handles(nvml, count: int) -> list:
    visible = cuda_visible_devices()
    total = nvml.nvmlDeviceGetCount()
    handles = []
    for entry in visible or [str(i) for i in range(min(count, total))]:
        if entry.isdigit():
            handle = nvml.nvmlDeviceGetHandleByIndex(int(entry)) if int(entry) < total else None
        else:
            handle = _uuid_handle(nvml, entry)
        if handle is None:
            break  # CUDA sees only the devices listed before an invalid entry
        handles.append(handle)
    if any(p.isdigit() for p in visible) and not cuda_pci_order():
        log.warning("GPU telemetry: CUDA_VISIBLE_DEVICES ordinals read as NVML (PCI) indices; "
                    "set CUDA_DEVICE_ORDER=PCI_BUS_ID so both orders agree")
    return handles


def nvml_name_index(nvml, handle) -> int:
    """The NVML index a device's metrics are named by: a MIG device takes its parent GPU's."""
    try:
        if nvml.nvmlDeviceIsMigDeviceHandle(handle):
            handle = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
    except nvml.NVMLError as exc:  # drivers before MIG (R450) lack these calls: every handle is a GPU
        log.debug("no MIG query: %s", exc)
    return nvml.nvmlDeviceGetIndex(handle)


def job_nvml_handles(nvml, count: int) -> list[tuple[int, object]]:
    """(NVML index, handle) of the job's first `count` GPUs, in CUDA order."""
    found = [h for h in (_uuid_handle(nvml, u) for u in _cuda_uuids(count)) if h is not None]
    return [(nvml_name_index(nvml, h), h) for h in (found or _environment_handles(nvml, count))[:count]]


def job_gpu_handles(count: int) -> list[tuple[int, object]]:
    """job_nvml_handles through pynvml, which the caller has initialized."""
    import pynvml

    return job_nvml_handles(pynvml, count)


def job_modules(items: list, module_id, count: int | None = None) -> list:
    """The job's first `count` (None: all) of `items`, one per device in index order: HABANA_VISIBLE_MODULES's
    devices in its order, found by `module_id(item)`; every device when the variable is unset."""
    modules = [int(m) for m in habana_visible_modules() if m.isdigit()]
    if modules:
        by_module = {module_id(item): item for item in items}
        items = [by_module[m] for m in modules if m in by_module]
    return list(items) if count is None else list(items)[:count]


def job_hlml_handles(hlml, count: int | None = None) -> list[tuple[int, object]]:
    """(HLML index, handle) of the job's first `count` (None: all) Gaudi devices."""
    handles = [(i, hlml.hlmlDeviceGetHandleByIndex(i)) for i in range(hlml.hlmlDeviceGetCount())]
    return job_modules(handles, lambda item: hlml.hlmlDeviceGetModuleID(item[1]), count)
