"""The sweep grid: workers x device decode x repeats, minus what the accelerator cannot do."""

from __future__ import annotations

from dataclasses import dataclass

from ..compare.grouping import Setting
from ..config import parse_bool, parse_int
from ..errors import ConfigError


@dataclass(frozen=True)
class SweepCell:
    """One child train run of the grid."""

    accel: str
    workers: int
    device_decode: bool
    repeat: int

    @property
    def setting(self) -> str:
        return Setting(self.workers, "device" if self.device_decode else "cpu").label  # compare's label

    @property
    def run_name(self) -> str:
        return f"{self.accel} {self.setting} r{self.repeat}"

    def train_args(self) -> list[str]:
        return [
            "--accel", self.accel, "--dataloader-num-workers", str(self.workers),
            "--device-decode", "true" if self.device_decode else "false", "--run-name", self.run_name,
        ]


@dataclass
class SweepPlan:
    cells: list[SweepCell]
    notes: list[str]


def _items(field_name: str, text) -> list[str]:
    items = [part.strip() for part in str(text).split(",") if part.strip()]
    if not items:
        raise ConfigError(field_name, text, "allowed: a comma-separated list, e.g. 0,1,2")
    return items


def parse_workers(text) -> list[int]:
    """'0,1,2' -> [0, 1, 2] (duplicates dropped, order kept)."""
    values = [parse_int("workers", item, 0) for item in _items("workers", text)]
    return list(dict.fromkeys(values))


def parse_device_decode(text) -> list[bool]:
    """'false,true' -> [False, True]."""
    values = [parse_bool("device_decode", item) for item in _items("device_decode", text)]
    return list(dict.fromkeys(values))


def plan_cells(accel: str, workers: list[int], decodes: list[bool], repeats: int,
               supports_device_decode: bool) -> SweepPlan:
    """Repeat-major order, so slow drift spreads over all settings instead of one."""
    notes = []
    if True in decodes and not supports_device_decode:
        notes.append(
            f"skipped device_decode=true on {accel}: the {accel} adapter has no on-device JPEG decode "
            f"({len(workers) * repeats} cells not run, not faked)"
        )
        decodes = [d for d in decodes if not d]
    cells = [
        SweepCell(accel, w, d, r)
        for r in range(1, repeats + 1) for d in decodes for w in workers
    ]
    return SweepPlan(cells, notes)
