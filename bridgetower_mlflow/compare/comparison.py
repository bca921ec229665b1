"""The whole result of a compare, built once and never changed afterwards."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .analysis.cost import PriceList
from .analysis.headline import HeadlinePair
from .analysis.published_pairs import PublishedPair
from .analysis.speedups import ConfigSection


@dataclass(frozen=True)
class Comparison:
    """Sections, the headline and published pairs built from them, what was used and what was left out."""

    sections: Sequence[ConfigSection]
    baseline: str | None
    allow_diff: tuple[str, ...]
    run_count: int
    left_out: Mapping[str, int]
    experiments: Sequence[str]
    notes: Sequence[str] = ()
    headline: Sequence[HeadlinePair] = ()
    published_pairs: Sequence[PublishedPair] = ()  # across batch sizes, for the sources that ran so
    prices: PriceList = field(default_factory=PriceList)

    def with_notes(self, lines: Sequence[str]) -> Comparison:
        """This comparison with more notes after its own (a gate's verdict)."""
        return dataclasses.replace(self, notes=(*self.notes, *lines))
