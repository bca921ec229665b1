"""phases.png: where each cell's step goes, a stacked bar of phase shares per accelerator and setting, one panel
per configuration (only cells whose runs logged a breakdown; none drawn as zero)."""

from __future__ import annotations

from pathlib import Path

from ..analysis.speedups import ConfigSection
from ..formatting import format_number
from ..report.tables import PHASE_SHORT, measured_cells, section_phases
from .plotting import Axis, Pyplot, save, section_title, wrapped

LABEL_FROM = 0.06  # a segment's share is written inside it from this size up


def _draw(axis: Axis, section: ConfigSection) -> None:
    cells = measured_cells(section)
    phases = section_phases(section)
    labels = [f"{column}\n{label}" for label, column, _ in cells]
    bottoms = [0.0] * len(cells)
    for phase in phases:
        shares = [cell.phase_shares().get(phase, 0.0) * 100 for _, _, cell in cells]  # absent: merged or unmeasured
        bars = axis.bar(range(len(cells)), shares, 0.6, bottom=bottoms, label=PHASE_SHORT[phase])
        for bar, share, bottom in zip(bars, shares, bottoms):
            if share >= LABEL_FROM * 100:
                axis.text(bar.get_x() + bar.get_width() / 2, bottom + share / 2, f"{share:.0f}%", ha="center",
                          va="center", fontsize=7)
        bottoms = [b + s for b, s in zip(bottoms, shares)]
    for index, (_, _, cell) in enumerate(cells):
        axis.text(index, max(bottoms[index], 100) + 2, f"{format_number(cell.median)} samples/s", ha="center",
                  fontsize=7)
    axis.set_xticks(range(len(cells)), labels, fontsize=7)
    axis.set_ylim(0, 112)
    axis.set_ylabel("share of the step, % (measured window)", fontsize=8)
    axis.set_title(wrapped("where the step goes: " + section_title(section), 70), fontsize=8)
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))


def write_phase_chart(plt: Pyplot, sections: list[ConfigSection], output_dir: Path) -> list[Path]:
    """phases.png, a panel per section with any measured breakdown; nothing where none was measured."""
    shown = [section for section in sections if measured_cells(section)]
    if not shown:
        return []
    width = max(8.0, 1.3 * max(len(measured_cells(section)) for section in shown) + 3)
    figure, axes = plt.subplots(len(shown), 1, figsize=(width, 4.8 * len(shown)), squeeze=False)
    for (axis,), section in zip(axes, shown):
        _draw(axis, section)
    return [save(plt, figure, output_dir / "phases.png")]
