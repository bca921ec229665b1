"""One Gaudi cell against one GPU cell: the one place a speedup and its noise verdict are computed."""

from __future__ import annotations

from dataclasses import dataclass

from .grouping import GroupStats, Setting, ratio
from .stats import within_noise


@dataclass(frozen=True)
class CellPair:
    """A Gaudi cell and a GPU cell set against each other (the same setting, or each side's best)."""

    gaudi: GroupStats
    gpu: GroupStats

    @property
    def setting(self) -> Setting:
        """The Gaudi side's setting (both sides' where they were matched)."""
        return self.gaudi.setting

    @property
    def speedup(self) -> float | None:
        """Gaudi samples/s over GPU samples/s, ratio of medians."""
        return ratio(self.gaudi.median, self.gpu.median)

    @property
    def within_noise(self) -> bool:
        return within_noise(self.gaudi, self.gpu)

    def same_cells(self, other: CellPair | None) -> bool:
        """Both sides are the very cells of `other` (a headline's matched pair is often its best)."""
        return other is not None and self.gaudi is other.gaudi and self.gpu is other.gpu
