"""Curves along a swept axis, and scaling over devices: per-device samples/s at N against the fewest devices."""

from __future__ import annotations

from dataclasses import dataclass

from ...contract import CPU_FAMILY, PHASE_ALL_REDUCE, accelerator_family
from .axes import BATCH_AXIS, DEVICES_AXIS, AxisPoint, axis_sort_key, numeric
from .grouping import GroupStats, Setting
from .speedups import ConfigSection


@dataclass(frozen=True)
class CurveLine:
    """One accelerator column and setting along one axis, the section's other swept axes held fixed."""

    column: str
    setting: Setting
    fixed: AxisPoint
    points: tuple[tuple[str, GroupStats], ...]  # (axis value, cell), in axis order

    @property
    def label(self) -> str:
        return " ".join(part for part in (self.column, self.setting.label, self.fixed.label) if part)

    @property
    def accelerator(self) -> str:
        return self.points[0][1].accelerator


def curve_lines(section: ConfigSection, axis: str) -> list[CurveLine]:
    """Every line of the section along `axis` (one per column, setting and value of the other axes)."""
    found: dict[tuple[str, Setting, AxisPoint], list[tuple[str, GroupStats]]] = {}
    for row in section.rows:
        for column, cell in row.cells.items():
            value = row.point.value(axis)
            if value is not None:
                found.setdefault((column, row.setting, row.point.without(axis)), []).append((value, cell))
    order = {column: index for index, column in enumerate(section.columns)}
    return [CurveLine(column, setting, fixed, tuple(sorted(points, key=lambda p: axis_sort_key(p[0]))))
            for (column, setting, fixed), points in sorted(
                found.items(), key=lambda item: (order[item[0][0]], item[0][1].sort_key(), item[0][2].sort_key()))]


@dataclass(frozen=True)
class ScalingPoint:
    """One device count of a line, against the line's fewest devices."""

    line: CurveLine
    devices: int
    cell: GroupStats
    base_devices: int
    base_per_device: float | None

    @property
    def per_device(self) -> float | None:
        return self.cell.per_device_median

    @property
    def efficiency(self) -> float | None:
        """Per-device samples/s here over per-device samples/s at the base count (1.0 is linear scaling)."""
        if self.per_device is None or not self.base_per_device:
            return None
        return self.per_device / self.base_per_device

    @property
    def all_reduce_share(self) -> float | None:
        return self.cell.phase_shares().get(PHASE_ALL_REDUCE)


def scaling_points(section: ConfigSection) -> list[ScalingPoint]:
    """Each line over devices, every count against the line's fewest (1 where measured, else named)."""
    if DEVICES_AXIS not in section.axes:
        return []
    points = []
    for line in curve_lines(section, DEVICES_AXIS):
        counts = [(int(numeric(value) or 0), cell) for value, cell in line.points]
        base_devices, base_cell = counts[0]
        points += [ScalingPoint(line, devices, cell, base_devices, base_cell.per_device_median)
                   for devices, cell in counts]
    return points


def cpu_devices_note(section: ConfigSection) -> str | None:
    """On CPU, devices are processes over one host's cores: a real curve of the host, not of separate devices."""
    cpu_cells = [cell for row in section.rows for cell in row.cells.values()
                 if accelerator_family(cell.accelerator) == CPU_FAMILY]
    if DEVICES_AXIS not in section.axes or not cpu_cells:
        return None
    cores = sorted({count for cell in cpu_cells for count in cell.host_cpu_counts}, key=axis_sort_key)
    where = f"the host's {' / '.join(cores)} cores" if cores else "the host's cores"
    return (f"cpu: devices are processes (torchrun ranks) sharing {where}; the scaling curve is the host's, "
            "not that of separate devices.")


def largest_batches(section: ConfigSection) -> dict[str, float]:
    """Column -> the largest batch size per device it ran in this section (what a memory limit allows)."""
    largest: dict[str, float] = {}
    for row in section.rows:
        batch = numeric(row.point.value(BATCH_AXIS) or "")
        for column in row.cells:
            if batch is not None:
                largest[column] = max(batch, largest.get(column, batch))
    return largest
