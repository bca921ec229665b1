"""CPU package power and energy from the Linux powercap RAPL counters, where the host exposes them.

Each package zone (/sys/class/powercap/intel-rapl:N, AMD's too) counts microjoules up to
max_energy_range_uj and wraps; sampled every few seconds, the wraps are counted (a package at 400 W
wraps about every 10 minutes).
"""

from __future__ import annotations

import threading
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")


def package_zones(root: Path = POWERCAP) -> list[Path]:
    """Top-level RAPL zones (one per CPU package); subzones (core, dram) would count twice."""
    return sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1 and (p / "energy_uj").exists())


class RaplSampler:
    """cpu_package_power_watts (all packages) each sample; energy_joules() since it started."""

    def __init__(self, root: Path = POWERCAP):
        self.zones = package_zones(root)
        if not self.zones:
            raise FileNotFoundError(f"no RAPL package zone under {root}")
        self._ranges = [int((z / "max_energy_range_uj").read_text()) for z in self.zones]
        self._last = self._read()
        self._total_uj, self._lock = 0, threading.Lock()
        self._last_time: float | None = None

    def _read(self) -> list[int]:
        return [int((z / "energy_uj").read_text()) for z in self.zones]

    def _advance(self) -> int:
        """Microjoules since the previous reading, wraps included (caller holds the lock)."""
        now = self._read()
        delta = sum(n - last if n >= last else n + span - last for n, last, span in zip(now, self._last, self._ranges))
        self._last = now
        self._total_uj += delta
        return delta

    def energy_joules(self) -> float:
        with self._lock:
            self._advance()
            return self._total_uj / 1e6

    def sample(self) -> dict[str, float]:
        import time

        with self._lock:
            delta, now = self._advance(), time.monotonic()
            elapsed, self._last_time = (now - self._last_time if self._last_time else None), now
        return {"cpu_package_power_watts": delta / 1e6 / elapsed} if elapsed else {}

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass
