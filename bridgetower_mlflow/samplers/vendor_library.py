"""What the NVML and HLML samplers share: the library's shutdown when the job's devices cannot be found, the
calls a device refuses (warned once, then skipped: MIG and vGPU refuse some), the energy counter, the shutdown."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class VendorLibrarySampler:
    """Over an initialized vendor library (`error`: its exception class, `shutdown`: its shutdown call) and the
    job's devices [(index, handle)] that `find_handles` returns; `energy_mj(handle)` is the device's counter."""

    device_label = "device"  # how the warnings name a device

    def __init__(self, error: type[Exception], shutdown: Callable[[], Any], find_handles: Callable[[], list],
                 energy_mj: Callable[[Any], float]):
        self._error, self._shutdown, self._energy_mj = error, shutdown, energy_mj
        try:
            self._handles = find_handles()
        except error:
            shutdown()
            raise
        self._unsupported: set[tuple[int, str]] = set()

    def _read(self, index: int, name: str, call: Callable[[], Any]) -> Any:
        """call(), or None where this device refused `name` (now or before)."""
        if (index, name) in self._unsupported:
            return None
        try:
            return call()
        except self._error as exc:
            self._unsupported.add((index, name))
            log.warning("%s %d: %s unavailable (%s); the other %s metrics go on",
                        self.device_label, index, name, exc, self.device_label)
            return None

    def energy_joules(self) -> float | None:
        """Total energy of these devices since their driver loaded (the library counts mJ), or None."""
        try:
            return sum(self._energy_mj(handle) for _, handle in self._handles) / 1000.0
        except self._error:
            return None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        try:
            self._shutdown()
        except Exception:  # noqa: BLE001 - shutdown of a telemetry library must never fail a run
            pass
