"""Pure: one Gaudi cell against one GPU cell on quality. Time to target is paired only where both sides ran the
same target; final quality differs only beyond both sides' repeats.

Beyond spread: the two sides' min-max ranges of the metric's final value do not overlap. A side with a single
run has no range, so its value is widened by SINGLE_RUN_TOLERANCE of itself (a run's final recall moves by a
few hundredths with the seed alone on the sample set); two single runs thus differ only by more than that.
"""

from __future__ import annotations

from dataclasses import dataclass

from .grouping import GroupStats, ratio
from .headline import CellPair
from .quality import QualityStats, Spread
from .runs import QualityKey

SINGLE_RUN_TOLERANCE = 0.05  # relative: a single run's final value, widened to +-5 % of itself


def _bounds(spread: Spread) -> tuple[float, float]:
    widen = SINGLE_RUN_TOLERANCE * abs(spread.median) if spread.n == 1 else 0.0
    return spread.minimum - widen, spread.maximum + widen


def differs(first: Spread, second: Spread) -> bool:
    """True when the two final values differ beyond both sides' spread (see the module's rule)."""
    low_first, high_first = _bounds(first)
    low_second, high_second = _bounds(second)
    return high_first < low_second or high_second < low_first


@dataclass(frozen=True)
class MetricGap:
    """A final eval metric whose values differ beyond the repeats' spread: each side's median."""

    metric: str
    gaudi: Spread
    gpu: Spread


@dataclass(frozen=True)
class QualityPair:
    """The two sides' repeats with one QualityKey: time to target, samples to target, final quality."""

    key: QualityKey
    gaudi: QualityStats
    gpu: QualityStats

    @property
    def time_to_target_speedup(self) -> float | None:
        """GPU seconds to target over Gaudi seconds (above 1: the Gaudi side got there first), medians."""
        gaudi, gpu = self.gaudi.time_to_target, self.gpu.time_to_target
        return ratio(gpu.median if gpu else None, gaudi.median if gaudi else None)

    @property
    def samples_ratio(self) -> float | None:
        """Gaudi samples to target over GPU samples to target, medians (above 1: the Gaudi side needed more)."""
        gaudi, gpu = self.gaudi.samples_to_target, self.gpu.samples_to_target
        return ratio(gaudi.median if gaudi else None, gpu.median if gpu else None)

    @property
    def intervals_differ(self) -> bool:
        """The sides evaluated at other sample intervals: time to target is only known at an evaluation."""
        return bool(self.gaudi.intervals and self.gpu.intervals and self.gaudi.intervals != self.gpu.intervals)

    @property
    def gaps(self) -> list[MetricGap]:
        """The final metrics that differ beyond spread (the target's metric with a target, else every one)."""
        found = []
        for metric in self.gaudi.compared_metrics:
            gaudi, gpu = self.gaudi.final(metric), self.gpu.final(metric)
            if gaudi is not None and gpu is not None and differs(gaudi, gpu):
                found.append(MetricGap(metric, gaudi, gpu))
        return found

    @property
    def compared(self) -> bool:
        """Both sides logged a final value of a metric compared (else the pair says nothing of quality)."""
        return any(self.gaudi.final(m) is not None and self.gpu.final(m) is not None
                   for m in self.gaudi.compared_metrics)


def quality_pairs(cells: CellPair) -> list[QualityPair]:
    """The QualityKeys both sides share, targets first: never a time to target across two targets."""
    gaudi = {stats.key: stats for stats in cells.gaudi.quality()}
    gpu = {stats.key: stats for stats in cells.gpu.quality()}
    return [QualityPair(key, gaudi[key], gpu[key]) for key in gaudi if key in gpu]


def unshared_targets(cells: CellPair) -> tuple[list[str], list[str]]:
    """The targets only one side ran (labels), Gaudi's then the GPU's: said, never paired."""
    gaudi, gpu = (_targets(cell) for cell in (cells.gaudi, cells.gpu))
    return [label for key, label in gaudi.items() if key not in gpu], [
        label for key, label in gpu.items() if key not in gaudi]


def _targets(cell: GroupStats) -> dict[QualityKey, str]:
    return {stats.key: stats.key.label for stats in cell.quality() if stats.key.target}
