"""Where each cell's step goes: its phase shares beside its samples/s (only where train measured phases)."""

from __future__ import annotations

from ..contract import ACCELERATOR_TAG, BOTTLENECK_TAG
from .formatting import Table, format_number, format_share
from .grouping import GroupStats
from .phases import PHASE_ORDER, PHASE_SHORT
from .speedups import ConfigSection


def measured_cells(section: ConfigSection) -> list[tuple[str, str, GroupStats]]:
    """(row label, column, cell) for every cell whose runs logged a phase breakdown, in table order."""
    return [(row.label, column, row.cells[column]) for row in section.rows for column in section.columns
            if column in row.cells and row.cells[column].phase_fractions]


def section_phases(section: ConfigSection) -> list[str]:
    """The phases any cell of the section measured, in the step's order."""
    seen = {phase for _, _, cell in measured_cells(section) for phase in cell.phase_fractions}
    return [phase for phase in PHASE_ORDER if phase in seen]


def phase_table(section: ConfigSection) -> Table | None:
    """One row per measured cell: samples/s, each phase's median share of the step, train's verdict tag."""
    cells = measured_cells(section)
    if not cells:
        return None  # runs from before the breakdown: no columns rather than zeros
    phases = section_phases(section)
    rows = []
    for label, column, cell in cells:
        shares = cell.phase_shares()  # '-': merged into another phase (Gaudi lazy mode) or not measured
        rows.append([label, column, format_number(cell.median),
                     *(format_share(shares.get(phase)) for phase in phases),
                     ", ".join(sorted(set(cell.bottlenecks))) or "-"])
    headers = ["setting", ACCELERATOR_TAG, "samples/s", *(PHASE_SHORT[phase] for phase in phases), BOTTLENECK_TAG]
    return "Where the step goes: median share of the measured window per phase", headers, rows
