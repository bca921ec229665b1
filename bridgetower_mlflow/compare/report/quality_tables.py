"""Quality in the report: each section's quality table, the headline's time-to-target columns and its sentences,
and how each writes quality (a figure over repeats, how many reached the target, a time-to-target speedup with its
samples ratio, the quality-differs flag; quality.csv and headline.csv use the same texts)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...contract import ACCELERATOR_TAG, TARGET_METRICS
from ..analysis.headline import CellPair, HeadlinePair
from ..analysis.quality import QualityStats, Spread
from ..analysis.quality_pairs import SINGLE_RUN_TOLERANCE, MetricGap, QualityPair, quality_pairs, unshared_targets
from ..analysis.speedups import ConfigSection
from ..formatting import Table, format_count, format_number, format_speedup

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
SAME_QUALITY = "same within spread"
DIFFERS = "quality differs"
NOT_REACHED_DROPPED = "1 did not reach: dropped as the slowest"

Placed = tuple[str, str, QualityStats]  # (row label, column, one target's repeats)


def spread_text(spread: Spread | None, number: Callable[[float], str] = format_number) -> str:
    """`0.23 (n=3, 0.21-0.25)`, `0.23 (n=1)`, `960 (n=5, 900-1,020, olympic 955)`; '-' for none."""
    if spread is None:
        return "-"
    if spread.n == 1:
        return f"{number(spread.median)} (n=1)"
    text = f"{number(spread.median)} (n={spread.n}, {number(spread.minimum)}-{number(spread.maximum)}"
    return text + (f", olympic {number(spread.olympic)})" if spread.olympic is not None else ")")


def reached_text(stats: QualityStats) -> str:
    """`3 of 3`, `2 of 3, 1 did not reach: dropped as the slowest`, `INVALID: 2 of 3 repeats did not reach ...`."""
    if not stats.key.target:
        return "-"
    best = stats.best_value
    best_part = f" (best {format_number(best)})" if best is not None else ""
    if stats.invalid:
        return f"INVALID: {stats.invalid}{best_part}"
    if not stats.reached:
        return f"0 of {stats.tries}: never reached{best_part}"
    dropped = f", {NOT_REACHED_DROPPED}" if stats.not_reached else ""
    return f"{stats.reached} of {stats.tries}{dropped}"


def intervals_text(stats: QualityStats) -> str:
    """The evaluation interval in samples (`960`; `480/960` where repeats differ); '-' where none was logged."""
    return "/".join(format_count(value) for value in stats.intervals) or "-"


def samples_part(samples_ratio: float, gaudi: str) -> str:
    """`gaudi2 needed 16 % more samples`, `... 12 % fewer samples`, `the same samples`."""
    percent = round(abs(samples_ratio - 1) * 100)
    if percent == 0:
        return f"{gaudi} needed the same samples"
    return f"{gaudi} needed {percent} % {'more' if samples_ratio > 1 else 'fewer'} samples"


def _why_none(pair: QualityPair, gaudi: str, gpu: str) -> str:
    """Why a pair has no time-to-target speedup: a side invalid or never there."""
    for name, stats in ((gaudi, pair.gaudi), (gpu, pair.gpu)):
        if stats.invalid:
            return f"{name}: {stats.invalid}"
        if not stats.reached:
            return f"{name} never reached it"
    return "no time to target logged"


def to_target_text(pair: QualityPair, gaudi: str, gpu: str) -> str:
    """`1.22x to eval_recall_at_5>=0.2 (gaudi2 needed 16 % more samples)`, or why there is no speedup."""
    speedup, samples = pair.time_to_target_speedup, pair.samples_ratio
    if speedup is None:
        return f"- to {pair.key.label} ({_why_none(pair, gaudi, gpu)})"
    parts = [samples_part(samples, gaudi)] if samples is not None else []
    if pair.intervals_differ:
        parts.append(f"evaluated every {intervals_text(pair.gaudi)} vs {intervals_text(pair.gpu)} samples")
    return f"{format_speedup(speedup)} to {pair.key.label}" + (f" ({'; '.join(parts)})" if parts else "")


def gaps_text(gaps: Sequence[MetricGap]) -> str:
    """`quality differs: eval_recall_at_5 0.21 vs 0.25` (medians, Gaudi first)."""
    return f"{DIFFERS}: " + ", ".join(
        f"{gap.metric} {format_number(gap.gaudi.median)} vs {format_number(gap.gpu.median)}" for gap in gaps)


def quality_verdict(pairs: Sequence[QualityPair]) -> str:
    """The quality-differs flag over a pair's shared targets (each named where several were compared);
    `same within spread`; '-' where nothing compares."""
    compared = [pair for pair in pairs if pair.compared]
    differing = [pair for pair in compared if pair.gaps]
    if not differing:
        return SAME_QUALITY if compared else "-"
    if len(compared) == 1:
        return gaps_text(differing[0].gaps)
    return "; ".join(f"{gaps_text(pair.gaps)} (target {pair.key.label})" for pair in differing)


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
