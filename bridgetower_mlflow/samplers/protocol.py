"""What the system monitor polls and what the energy window reads: defined here once, for every sampler."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class Sampler(Protocol):
    """Polled by the monitor: `sample` returns {bare name: value} (the monitor adds `system/`)."""

    def start(self) -> None:
        """Called once, before the first sample."""

    def sample(self) -> dict[str, float]: ...

    def stop(self) -> None:
        """Called once, after the last sample: release what the sampler holds."""


@runtime_checkable
class EnergyCounter(Protocol):
    """A cumulative hardware energy counter (NVML, HLML, RAPL): joules since some fixed instant, or None where
    the device refuses it."""

    def energy_joules(self) -> float | None: ...
