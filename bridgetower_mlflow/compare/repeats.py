"""MLPerf-style repeats: failed repeats stay in the record; one of N is dropped as the slowest, two make a cell invalid.

A sweep tags each child run with its grid cell and repeat, so a repeat that failed still names its cell.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..contract import ERROR_TAG, PARENT_RUN_TAG, SWEEP_CELL_TAG, SWEEP_REPEAT_TAG

if TYPE_CHECKING:
    from mlflow.entities import Run

FAILED_STATUS = "FAILED"
INVALID_FROM = 2  # failed repeats that make a cell invalid (one is dropped as the slowest: the olympic rule)
NOISY_SPREAD = 0.05  # (max - min) / median above this: the cell is flagged noisy
REASON_LIMIT = 200  # characters of a failed repeat's reason shown beside the cell


@dataclass(frozen=True)
class FailedRepeat:
    """A sweep child run that ended FAILED: its cell, its repeat and why."""

    parent_run_id: str
    cell: str
    repeat: str
    run_id: str
    reason: str

    @property
    def cell_key(self) -> tuple[str, str]:
        return (self.parent_run_id, self.cell)

    def sort_key(self) -> tuple[int, str, str]:
        """In repeat order (the store lists runs newest first)."""
        return (int(self.repeat) if self.repeat.isdigit() else 0, self.repeat, self.run_id)


def failed_repeat(run: Run) -> FailedRepeat | None:
    """The failed repeat an ended sweep child run is; None for a run that is not one (or did not fail)."""
    tags = run.data.tags
    if run.info.status != FAILED_STATUS or not tags.get(SWEEP_CELL_TAG) or not tags.get(PARENT_RUN_TAG):
        return None
    reason = (tags.get(ERROR_TAG) or "no reason recorded").splitlines()[0][:REASON_LIMIT]
    return FailedRepeat(tags[PARENT_RUN_TAG], tags[SWEEP_CELL_TAG], tags.get(SWEEP_REPEAT_TAG, "?"),
                        run.info.run_id, reason)


def spread(values: list[float]) -> float | None:
    """(max - min) / median of two or more repeats; None for a single run (or a zero median)."""
    if len(values) < 2:
        return None
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else None


def invalid_reason(finished: int, failures: list[FailedRepeat]) -> str:
    """Why a cell is invalid ('' when it is not): two or more of its repeats failed."""
    if len(failures) < INVALID_FROM:
        return ""
    first = min(failures, key=FailedRepeat.sort_key)
    return f"{len(failures)} of {finished + len(failures)} repeats failed ({first.reason})"


def unmatched_notes(failures: list[FailedRepeat], matched: set[tuple[str, str]]) -> list[str]:
    """A note per sweep cell whose every repeat failed (no finished run gives it a configuration)."""
    cells: dict[tuple[str, str], list[FailedRepeat]] = {}
    for failure in failures:
        if failure.cell_key not in matched:
            cells.setdefault(failure.cell_key, []).append(failure)
    return [f"Sweep {parent} cell {cell!r}: all {len(found)} repeats failed, nothing to compare "
            f"({min(found, key=FailedRepeat.sort_key).reason})" for (parent, cell), found in sorted(cells.items())]
