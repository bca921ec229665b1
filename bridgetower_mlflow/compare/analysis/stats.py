"""Pure repeat statistics, MLPerf's way: the olympic average, the spread, the within-noise test for a speedup, and
failed repeats, which stay in the record: one of N is dropped as the slowest, two make a cell invalid.

A sweep tags each child run with its grid cell and repeat, so a repeat that failed still names its cell.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Protocol

from .runs import FailedRepeat

OLYMPIC_MIN_RUNS = 5  # MLPerf's smallest run count (ResNet); fewer runs keep too little after trimming
INVALID_FROM = 2  # failed repeats that make a cell invalid (one is dropped as the slowest: the olympic rule)
NOISY_SPREAD = 0.05  # (max - min) / median above this: the cell is flagged noisy


def olympic_mean(values: Iterable[float], failed: int = 0) -> float | None:
    """Mean with the single best and worst run dropped (MLPerf's olympic average); None under 5 runs.

    Trimming one run from each end never moves the median, so the trimmed *mean* is the aggregate
    that differs from it. One failed repeat counts as the worst run (the one dropped); with more the
    cell is invalid and has no average.
    """
    ordered = sorted(values)
    if failed > 1 or len(ordered) + failed < OLYMPIC_MIN_RUNS:
        return None
    return statistics.fmean(ordered[1 - failed:-1])


def median_or_none(values: Sequence[float] | None) -> float | None:
    return statistics.median(values) if values else None


class Repeats(Protocol):
    """What the noise test reads of a cell of repeats."""

    @property
    def n(self) -> int: ...

    @property
    def minimum(self) -> float: ...

    @property
    def maximum(self) -> float: ...


def within_noise(first: Repeats | None, second: Repeats | None) -> bool:
    """True when the two cells' min-max ranges overlap (a single run is a point; two points say nothing)."""
    if first is None or second is None or first is second or (first.n < 2 and second.n < 2):
        return False  # a cell against itself is 1.00x by definition, not a measurement
    return first.minimum <= second.maximum and second.minimum <= first.maximum


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
