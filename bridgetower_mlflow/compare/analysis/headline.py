"""Pure headline: each Gaudi column against each GPU column of a section, whatever the baseline.

Pairs sit at one axis point: the same batch size, device count and strategy on both sides. A CellPair (one Gaudi
cell against one GPU cell) is the one place a speedup and its noise verdict are computed; a pair's `why` is the phase
behind most of its gap, where both sides measured phases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...contract import CUDA_FAMILY, GAUDI_FAMILY, PHASE_FORWARD_BACKWARD, PHASES, accelerator_family
from .axes import AxisPoint
from .grouping import GroupStats, Setting, ratio
from .runs import PHASE_ORDER
from .speedups import ConfigSection
from .stats import within_noise

GAUDI_SIDE, GPU_SIDE = GAUDI_FAMILY, "gpu"  # how tables and JSON name the two sides of a pair
MATCHED_RULE = ("matched = the same workers and decode class on both, at the setting where the GPU is "
                "fastest among those both ran; best = each side's fastest setting")
MERGED_PARTS = (PHASES[2], PHASES[3])  # forward and backward
# (verb, what) for the headline's sentence, `h100 waits 31 % on data, gaudi2 4 %`
PHASE_WORDS = dict(zip(PHASE_ORDER, (
    ("waits", "on data"), ("spends", "copying to the device"), ("spends", "in forward"), ("spends", "in backward"),
    ("spends", "in forward+backward"), ("spends", "in the optimizer step"), ("spends", "in all-reduce"),
    ("spends", "in other host work"))))
Side = tuple[dict[str, float], dict[str, float]]  # (shares, seconds per step) of one cell


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


@dataclass(frozen=True)
class HeadlinePair:
    """One Gaudi column against one GPU column of one configuration section, at one axis point."""

    section_index: int  # 1-based, as the sections are listed
    section: ConfigSection
    gaudi: str
    gpu: str
    matched: CellPair | None  # the same setting on both, where the GPU is fastest; None when none is shared
    best: CellPair  # each side's fastest setting
    every_setting: tuple[CellPair, ...] = ()  # every setting both ran, in the section's order
    point: AxisPoint = AxisPoint()  # where on the section's swept axes both sides ran

    @property
    def matched_setting(self) -> Setting | None:
        return self.matched.setting if self.matched else None

    @property
    def why(self) -> str | None:
        """The phase behind most of the gap, as both sides' shares (matched cells, else best); None unmeasured."""
        cells = self.matched or self.best
        return explain_gap(self.gaudi, cells.gaudi, self.gpu, cells.gpu)


def explain_gap(first_name: str, first: GroupStats, second_name: str, second: GroupStats) -> str | None:
    """`h100 waits 31 % on data, gaudi2 4 %`: the slower cell's phase that explains most of the gap."""
    if not first.phase_fractions or not second.phase_fractions or first.median == second.median:
        return None
    (slow_name, slow), (fast_name, fast) = sorted(((first_name, first), (second_name, second)),
                                                  key=lambda side: side[1].median)
    return gap_sentence(slow_name, (slow.phase_shares(), slow.phase_step_seconds()),
                        fast_name, (fast.phase_shares(), fast.phase_step_seconds()))


def merged_like(values: dict[str, float], other: dict[str, float]) -> dict[str, float]:
    """`values` with forward and backward merged where `other` has them merged (Gaudi lazy mode)."""
    if PHASE_FORWARD_BACKWARD not in other or PHASE_FORWARD_BACKWARD in values:
        return values
    if not all(part in values for part in MERGED_PARTS):
        return values
    merged = {k: v for k, v in values.items() if k not in MERGED_PARTS}
    merged[PHASE_FORWARD_BACKWARD] = sum(values[part] for part in MERGED_PARTS)
    return merged


def _comparable(first: dict[str, float], second: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    return merged_like(first, second), merged_like(second, first)


def gap_phase(slow: Side, fast: Side) -> str | None:
    """The phase where the slower cell spends the most more than the faster one.

    Each side is (fractions, seconds per step); seconds are compared where both sides have them (the same
    batch and devices: a step is the same work), else fractions.
    """
    use_seconds = bool(slow[1]) and bool(fast[1])
    mine, theirs = _comparable(slow[1], fast[1]) if use_seconds else _comparable(slow[0], fast[0])
    gaps = {phase: mine[phase] - theirs[phase] for phase in PHASE_ORDER if phase in mine and phase in theirs}
    phase = max(gaps, key=lambda p: gaps[p], default=None)
    return phase if phase is not None and gaps[phase] > 0 else None


def gap_sentence(slow_name: str, slow: Side, fast_name: str, fast: Side) -> str | None:
    """`h100 waits 31 % on data, gaudi2 4 %`: the phase behind most of the gap, as both sides' shares."""
    phase = gap_phase(slow, fast)
    if phase is None:
        return None
    slow_share, fast_share = _comparable(slow[0], fast[0])
    if phase not in slow_share or phase not in fast_share:
        return None
    verb, what = PHASE_WORDS[phase]
    return f"{slow_name} {verb} {slow_share[phase] * 100:.0f} % {what}, {fast_name} {fast_share[phase] * 100:.0f} %"


def column_accelerators(section: ConfigSection) -> dict[str, str]:
    """Column -> accelerator kind (a column may carry allowed differences in its name)."""
    return {row.column: row.best.accelerator for row in section.best_rows}


def _pair(index: int, section: ConfigSection, point: AxisPoint, gaudi: str, gpu: str) -> HeadlinePair | None:
    best = {column: row.best for column, row in section.best_at(point).items()}
    if gaudi not in best or gpu not in best:
        return None  # one side did not run at this point: never paired across batch sizes or device counts
    shared = [row for row in section.rows if row.point == point and gaudi in row.cells and gpu in row.cells]
    matched = max(shared, key=lambda row: row.cells[gpu].median, default=None)
    return HeadlinePair(
        section_index=index, section=section, gaudi=gaudi, gpu=gpu,
        matched=CellPair(matched.cells[gaudi], matched.cells[gpu]) if matched else None,
        best=CellPair(best[gaudi], best[gpu]),
        every_setting=tuple(CellPair(row.cells[gaudi], row.cells[gpu]) for row in shared),
        point=point,
    )


def build_headline(sections: list[ConfigSection]) -> list[HeadlinePair]:
    """Every (Gaudi, GPU) column pair at each point of each section: measured sections first, as listed."""
    pairs = []
    for index, section in enumerate(sections, 1):
        kinds = {column: accelerator_family(accel) for column, accel in column_accelerators(section).items()}
        gaudis = [c for c in section.columns if kinds.get(c) == GAUDI_FAMILY]
        gpus = [c for c in section.columns if kinds.get(c) == CUDA_FAMILY]
        found = (_pair(index, section, point, gaudi, gpu) for point in section.points
                 for gaudi in gaudis for gpu in gpus)
        pairs += [pair for pair in found if pair is not None]
    return pairs


def absent_pair_note(sections: Sequence[ConfigSection]) -> str:
    """Why the headline is empty: which families ran, none of them side by side."""
    found: dict[str | None, set[str]] = {GAUDI_FAMILY: set(), CUDA_FAMILY: set()}
    for section in sections:
        for accel in column_accelerators(section).values():
            found.setdefault(accelerator_family(accel), set()).add(accel)
    gaudi = ", ".join(sorted(found[GAUDI_FAMILY])) or "none"
    gpu = ", ".join(sorted(found[CUDA_FAMILY])) or "none"
    return (f"No Gaudi-vs-GPU headline: no configuration has both (Gaudi runs: {gaudi}; GPU runs: {gpu}). "
            "Pairs need the same batch size and device count on both sides (other values are curves of one "
            "section, never paired); --allow-diff sets different values side by side.")
