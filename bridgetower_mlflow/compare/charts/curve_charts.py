"""Curves along each swept axis: samples/s, per-device samples/s and peak memory against devices, batch size or
strategy, one line per accelerator and setting, repeats' min-max as error bars; scaling draws the ideal line, a
batch-size chart marks each accelerator's largest batch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..analysis.axes import AXIS_TITLES, BATCH_AXIS, DEVICES_AXIS, STRATEGY_AXIS, numeric
from ..analysis.grouping import GroupStats
from ..analysis.scaling import CurveLine, curve_lines, largest_batches
from ..analysis.speedups import ConfigSection
from .plotting import Axis, Color, Pyplot, save, section_title, wrapped

AXIS_FILES = {DEVICES_AXIS: "scaling.png", BATCH_AXIS: "batch_size.png", STRATEGY_AXIS: "strategy.png"}
Spread = tuple[float, float, float]  # (median, min, max)
CellValue = Callable[[GroupStats], Spread | None]


def _throughput(cell: GroupStats) -> Spread | None:
    return cell.median, cell.minimum, cell.maximum


def _per_device(cell: GroupStats) -> Spread | None:
    median = cell.per_device_median
    return None if median is None else (median, min(cell.per_device), max(cell.per_device))


def _memory(cell: GroupStats) -> Spread | None:
    peak = cell.peak_memory_gb
    return None if peak is None else (peak, min(cell.peak_memory), peak)


THROUGHPUT_LABEL, PER_DEVICE_LABEL = "samples/s (median, min-max of repeats)", "samples/s per device"
MEMORY_LABEL = "peak device memory, GB"
PANELS: tuple[tuple[str, Callable[[GroupStats], Spread | None]], ...] = (
    (THROUGHPUT_LABEL, _throughput), (PER_DEVICE_LABEL, _per_device), (MEMORY_LABEL, _memory))


def _panels(lines: list[CurveLine]) -> list[tuple[str, Callable[[GroupStats], Spread | None]]]:
    """The panels some cell has a value for (memory only where a device reported one)."""
    return [(label, value) for label, value in PANELS
            if any(value(cell) is not None for line in lines for _, cell in line.points)]


def _positions(axis: str, lines: list[CurveLine]) -> dict[str, float]:
    values = list(dict.fromkeys(value for line in lines for value, _ in line.points))
    if all(numeric(value) is not None for value in values):
        return {value: float(numeric(value) or 0.0) for value in values}
    return {value: float(index) for index, value in enumerate(values)}  # strategies: side by side


def _ideal(axis: Axis, line: CurveLine, label: str, xs: list[float], color: Color) -> None:
    """Linear scaling from the line's fewest devices: samples/s grows with N, per device stays level."""
    base = line.points[0][1].per_device_median
    if base is None or label == MEMORY_LABEL:
        return
    ideal = [base * x for x in xs] if label == THROUGHPUT_LABEL else [base] * len(xs)
    axis.plot(xs, ideal, linestyle="--", linewidth=1, color=color, alpha=0.6)


def _mark_largest(axis: Axis, column: str, batch: float, y: float, color: Color, first: bool) -> None:
    axis.plot([batch], [y], marker="*", markersize=14, color=color, linestyle="none")
    if first:  # once per accelerator column: every line of it ends at the same batch
        axis.annotate(f"{column}: largest b{batch:g}", (batch, y), fontsize=7, textcoords="offset points",
                      xytext=(4, 6))


def _draw_panel(axis: Axis, section: ConfigSection, key: str, label: str, value: CellValue) -> None:
    lines = curve_lines(section, key)
    positions = _positions(key, lines)
    largest = largest_batches(section) if key == BATCH_AXIS else {}
    marked: set[str] = set()
    for line in lines:
        found = [(positions[x], spread) for x, cell in line.points if (spread := value(cell)) is not None]
        if not found:
            continue
        xs, ys = [x for x, _ in found], [s[0] for _, s in found]
        errors = [[s[0] - s[1] for _, s in found], [s[2] - s[0] for _, s in found]]
        drawn = axis.errorbar(xs, ys, yerr=errors, marker="o", capsize=3, label=line.label)
        color = drawn.lines[0].get_color()
        if key == DEVICES_AXIS:
            _ideal(axis, line, label, xs, color)
        if line.column in largest and largest[line.column] in xs:
            batch = largest[line.column]
            _mark_largest(axis, line.column, batch, ys[xs.index(batch)], color, line.column not in marked)
            marked.add(line.column)
    if key == DEVICES_AXIS and label != MEMORY_LABEL:
        axis.plot([], [], linestyle="--", color="grey", label="ideal (linear from the fewest devices)")
    axis.set_xticks(list(positions.values()), list(positions), fontsize=8)
    axis.set_xlabel(AXIS_TITLES[key], fontsize=8)
    axis.set_ylabel(label, fontsize=8)
    axis.legend(fontsize=7)


def write_curve_charts(plt: Pyplot, sections: list[ConfigSection], output_dir: Path) -> list[Path]:
    """One PNG per swept axis, a row per section that sweeps it."""
    paths = []
    for key, name in AXIS_FILES.items():
        shown = [(s, _panels(curve_lines(s, key))) for s in sections if key in s.axes]
        shown = [(s, panels) for s, panels in shown if panels]
        if not shown:
            continue
        columns = max(len(panels) for _, panels in shown)
        figure, axes = plt.subplots(len(shown), columns, figsize=(6.5 * columns, 4.6 * len(shown)), squeeze=False)
        for row, (section, panels) in zip(axes, shown):
            for axis in row[len(panels):]:
                axis.axis("off")
            for axis, (label, value) in zip(row, panels):
                _draw_panel(axis, section, key, label, value)
            row[0].set_title(wrapped(section_title(section), 60), fontsize=8)
            for axis, (label, _) in zip(row[1:], panels[1:]):
                axis.set_title(f"{label} against {AXIS_TITLES[key]}", fontsize=8)
        paths.append(save(plt, figure, output_dir / name))
    return paths
