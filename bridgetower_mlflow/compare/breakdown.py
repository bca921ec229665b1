"""Where each cell's step goes: its phase shares beside its samples/s (only where train measured phases)."""

from __future__ import annotations

from ..contract import ACCELERATOR_TAG, BOTTLENECK_TAG
from .formatting import Table, format_number, format_share
from .grouping import GroupStats
from .phases import PHASE_ORDER, PHASE_SHORT
from .speedups import ConfigSection

EPOCH_START_COLUMN = "epoch start"  # train_epoch_start_extra_fraction: not a phase, the steps that opened an epoch


def measured_cells(section: ConfigSection) -> list[tuple[str, str, GroupStats]]:
    """(row label, column, cell) for every cell whose runs logged a phase breakdown, in table order."""
    return [(row.label, column, row.cells[column]) for row in section.rows for column in section.columns
            if column in row.cells and row.cells[column].phase_fractions]


def section_phases(section: ConfigSection) -> list[str]:
    """The phases any cell of the section measured, in the step's order."""
    seen = {phase for _, _, cell in measured_cells(section) for phase in cell.phase_fractions}
    return [phase for phase in PHASE_ORDER if phase in seen]


def phase_table(section: ConfigSection) -> Table | None:
    """One row per measured cell: samples/s, each phase's median share of the step, what epochs' first steps
    cost beyond the others (where a run logged it), train's verdict tag."""
    cells = measured_cells(section)
    if not cells:
        return None  # runs from before the breakdown: no columns rather than zeros
    phases = section_phases(section)
    epochs = any(cell.epoch_start_share is not None for _, _, cell in cells)
    rows = []
    for label, column, cell in cells:
        shares = cell.phase_shares()  # '-': merged into another phase (Gaudi lazy mode) or not measured
        rows.append([label, column, format_number(cell.median),
                     *(format_share(shares.get(phase)) for phase in phases),
                     *([format_share(cell.epoch_start_share)] if epochs else []),
                     ", ".join(sorted(set(cell.bottlenecks))) or "-"])
    headers = ["setting", ACCELERATOR_TAG, "samples/s", *(PHASE_SHORT[phase] for phase in phases),
               *([EPOCH_START_COLUMN] if epochs else []), BOTTLENECK_TAG]
    caption = "Where the step goes: median share of the measured window per phase"
    if epochs:
        caption += ("; epoch start: what the steps that opened an epoch cost beyond the others' median, a share of "
                    "the same window already inside the phases (the loader's workers start again there)")
    return caption, headers, rows
