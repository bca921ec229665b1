"""Gaudi telemetry from the hl-smi CLI, where pyhlml is not installed. hl-smi lists every device of the host:
the job's are those of HABANA_VISIBLE_MODULES (module ids), named by hl-smi index."""

from __future__ import annotations

import shutil
import subprocess

from .hpu_readings import MB, HpuReading, hpu_metrics
from .job_devices import job_modules

HL_SMI_FIELDS = "index,module_id,utilization.aip,memory.used,memory.total,power.draw"
MIB = 2**20  # hl-smi reports memory in MiB


def parse_hl_smi(text: str) -> list[HpuReading]:
    """Parse `hl-smi -Q <HL_SMI_FIELDS> --format csv,noheader,nounits` output."""
    readings = []
    for line in text.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 6 or not parts[0].isdigit():
            raise ValueError(f"unexpected hl-smi line {line!r}; expected {HL_SMI_FIELDS}")
        index, module, util, used, total, power = parts
        used_mb, total_mb = (None if v is None else v * MIB / MB for v in (_number(used), _number(total)))
        module_id = int(module) if module.isdigit() else None
        readings.append(HpuReading(int(index), _number(util), used_mb, total_mb, _number(power), module_id))
    return readings


def _number(text: str) -> float | None:
    """A reading, or None for hl-smi's N/A (absent, not zero)."""
    return float(text.split()[0]) if text and text.split()[0].replace(".", "", 1).isdigit() else None


def run_hl_smi(fields: str) -> str:
    """hl-smi's CSV answer for `fields` (raises OSError/SubprocessError on failure)."""
    return subprocess.run(["hl-smi", "-Q", fields, "--format", "csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=10, check=True).stdout


class HlSmiSampler:
    """The HLML sampler's metrics (no energy counter) from hl-smi."""

    def __init__(self, count: int):
        if shutil.which("hl-smi") is None:
            raise FileNotFoundError("hl-smi is not on PATH")
        self.count = count

    def start(self) -> None:
        pass

    def sample(self) -> dict[str, float]:
        readings = sorted(parse_hl_smi(run_hl_smi(HL_SMI_FIELDS)), key=lambda r: r.index)
        return hpu_metrics(job_modules(readings, lambda r: r.module_id, self.count))

    def stop(self) -> None:
        pass
