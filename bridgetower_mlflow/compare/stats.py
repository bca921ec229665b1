"""Pure repeat statistics: MLPerf's olympic average and the within-noise test for a speedup."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Protocol

OLYMPIC_MIN_RUNS = 5  # MLPerf's smallest run count (ResNet); fewer runs keep too little after trimming


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
