"""Quality in the report: each section's quality table, the headline's time-to-target columns and its sentences."""

from __future__ import annotations

from collections.abc import Sequence

from ..contract import ACCELERATOR_TAG, TARGET_METRICS
from .formatting import Table, format_speedup
from .headline import HeadlinePair
from .pairs import CellPair
from .quality import QualityStats
from .quality_pairs import SINGLE_RUN_TOLERANCE, quality_pairs, unshared_targets
from .quality_text import (
    DIFFERS,
    SAME_QUALITY,
    format_count,
    intervals_text,
    quality_verdict,
    reached_text,
    spread_text,
    to_target_text,
)
from .speedups import ConfigSection

QUALITY_CAPTION = "Quality per cell and target: final eval metrics, median (n, min-max)"
TARGET_CAPTION = (
    "; time to target on MLPerf's clock (first training step to the end of the evaluation that reached it, "
    "evaluations included) and samples to target, median over the repeats that reached it, olympic mean from 5 "
    "repeats; a repeat that did not reach the target counts as MLPerf's non-converged run: one is dropped as the "
    "slowest, two make the cell INVALID")
QUALITY_NOTE = (
    "Quality: each section's quality table has each cell's final eval metrics per target (or none); 'quality "
    "differs': the two sides' final values (the target's metric, else every eval metric) have min-max ranges that "
    f"do not overlap, a single run's value widened by {SINGLE_RUN_TOLERANCE:.0%} of itself; the headline has a "
    "quality column only where some pair differs.")
TARGET_NOTE = ("Time to target: 'Nx to <target>' is the GPU's median seconds over the Gaudi's, paired only where "
               "both ran that target; beside it, how many more or fewer samples the Gaudi needed (medians).")
TO_TARGET_HEADERS = ("matched, to target", "best, to target")
QUALITY_HEADER = "quality (final, best vs best)"

Placed = tuple[str, str, QualityStats]  # (row label, column, one target's repeats)


def placed_quality(section: ConfigSection) -> list[Placed]:
    """Every cell's quality groups in table order, those with anything to show (eval metrics or a target)."""
    return [(row.label, column, stats) for row in section.rows for column in section.columns if column in row.cells
            for stats in row.cells[column].quality() if stats.key.target or stats.runs[0][1].finals]


def quality_table(section: ConfigSection) -> Table | None:
    """One row per cell and target; time-to-target columns only where some run had a target (never zeros)."""
    placed = placed_quality(section)
    if not placed:
        return None  # published numbers, or runs from before evaluations were logged
    metrics = [m for m in TARGET_METRICS if any(stats.final(m) is not None for *_, stats in placed)]
    targets = any(stats.key.target for *_, stats in placed)
    rows = []
    for label, column, stats in placed:
        row = [label, column, stats.key.label, *(spread_text(stats.final(m)) for m in metrics)]
        if targets:
            row += [reached_text(stats), spread_text(stats.samples_to_target, format_count),
                    spread_text(stats.time_to_target), intervals_text(stats)]
        rows.append(row)
    headers = ["setting", ACCELERATOR_TAG, "target", *metrics]
    if targets:
        headers += ["reached", "samples to target", "time to target, s", "eval every, samples"]
    return QUALITY_CAPTION + (TARGET_CAPTION if targets else ""), headers, rows


def has_targets(cells: CellPair | None) -> bool:
    return cells is not None and any(s.key.target for cell in (cells.gaudi, cells.gpu) for s in cell.quality())


def to_target_cell(cells: CellPair | None, gaudi: str, gpu: str) -> str:
    """Each shared target's speedup and samples ratio; targets only one side ran are named, never paired."""
    if cells is None:
        return "-"
    parts = [to_target_text(pair, gaudi, gpu) for pair in quality_pairs(cells) if pair.key.target]
    only_gaudi, only_gpu = unshared_targets(cells)
    if only_gaudi or only_gpu:
        parts.append(f"targets differ, not paired ({gaudi}: {', '.join(only_gaudi) or 'none'}; "
                     f"{gpu}: {', '.join(only_gpu) or 'none'})")
    return "; ".join(parts) or "-"


def quality_cell(pair: HeadlinePair) -> str:
    """Best vs best's quality verdict, and the matched cells' where they are other cells and say otherwise."""
    best = quality_verdict(quality_pairs(pair.best))
    if pair.matched is None or pair.matched.same_cells(pair.best):
        return best
    matched = quality_verdict(quality_pairs(pair.matched))
    return best if matched in (best, "-") else f"{best}; matched: {matched}"


def headline_quality(pairs: Sequence[HeadlinePair]) -> tuple[list[str], list[list[str]]]:
    """(headers, a row part per pair) for the headline table: none where no run had a target or eval metrics."""
    targets = any(has_targets(pair.best) or has_targets(pair.matched) for pair in pairs)
    verdicts = [quality_cell(pair) for pair in pairs]
    compared = any(DIFFERS in verdict for verdict in verdicts)  # a column where some pair differs, not one of 'same'
    headers = [*(TO_TARGET_HEADERS if targets else ()), *([QUALITY_HEADER] if compared else [])]
    rows = []
    for pair, verdict in zip(pairs, verdicts):
        row = [to_target_cell(pair.matched, pair.gaudi, pair.gpu),
               to_target_cell(pair.best, pair.gaudi, pair.gpu)] if targets else []
        rows.append(row + ([verdict] if compared else []))
    return headers, rows


def every_setting_quality(pairs: Sequence[HeadlinePair]) -> tuple[list[str], list[list[str]]]:
    """(headers, a row part per shared setting) for the every-setting table: to target and quality."""
    shared = [(pair, cells) for pair in pairs for cells in pair.every_setting]
    targets = any(has_targets(cells) for _, cells in shared)
    verdicts = [quality_verdict(quality_pairs(cells)) for _, cells in shared]
    compared = any(DIFFERS in verdict for verdict in verdicts)
    headers = [*(["to target"] if targets else []), *(["quality (final)"] if compared else [])]
    rows = [([to_target_cell(cells, pair.gaudi, pair.gpu)] if targets else []) + ([verdict] if compared else [])
            for (pair, cells), verdict in zip(shared, verdicts)]
    return headers, rows


def _sentence(place: str, which: str, cells: CellPair, pair: HeadlinePair) -> str | None:
    shared = quality_pairs(cells)
    reached = [to_target_text(q, pair.gaudi, pair.gpu) for q in shared if q.key.target]
    verdict = quality_verdict(shared)
    if not reached and verdict in (SAME_QUALITY, "-"):
        return None  # nothing beyond samples/s to say
    parts = [f"{format_speedup(cells.speedup)} samples/s", *reached]
    tail = f"; {verdict if verdict != SAME_QUALITY else 'quality ' + verdict}" if verdict != "-" else ""
    return f"{place} {pair.gaudi} vs {pair.gpu}, {which}: {', '.join(parts)}{tail}"


def headline_sentences(pairs: Sequence[HeadlinePair], places: Sequence[str]) -> list[str]:
    """`[1] measured gaudi2 vs h100, best vs best: 1.41x samples/s, 1.22x to eval_recall_at_5>=0.2 (gaudi2
    needed 16 % more samples); quality differs: eval_recall_at_5 0.21 vs 0.25`, where a target or quality says more."""
    lines = []
    for pair, place in zip(pairs, places):
        found = [_sentence(place, "best vs best", pair.best, pair)]
        if pair.matched is not None and not pair.matched.same_cells(pair.best):
            found.append(_sentence(place, f"matched {pair.matched.setting.label}", pair.matched, pair))
        lines += [line for line in found if line]
    return lines
