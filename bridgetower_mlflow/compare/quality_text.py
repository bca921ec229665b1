"""How compare writes quality: a figure over repeats, how many reached the target, a time-to-target speedup with its
samples ratio, and the quality-differs flag (every quality table, sentence and CSV text uses these)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .formatting import format_number, format_speedup
from .quality import QualityStats, Spread
from .quality_pairs import MetricGap, QualityPair

SAME_QUALITY = "same within spread"
DIFFERS = "quality differs"
NOT_REACHED_DROPPED = "1 did not reach: dropped as the slowest"


def format_count(value: float) -> str:
    """Samples as a whole number with thousands separators: `12,480`."""
    return f"{value:,.0f}"


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
