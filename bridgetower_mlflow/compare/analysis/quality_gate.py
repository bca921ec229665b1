"""The gate holds quality too: per configuration and target, the median final value of the target's metric and
the samples to target (with MLPerf's reference convergence point), written beside samples/s and checked later.

A configuration fails when its median final target metric is worse than the gate's by more than the quality
tolerance (relative: 0.10 allows 10 % worse), when its median samples to target grew by more than it, when it no
longer reaches the target, or when it reaches it in markedly fewer samples than the gate's runs (convergence.py:
suspicious, not celebrated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...contract import SAMPLES_TO_TARGET_METRIC
from ...errors import ConfigError
from ...target import parse_target
from ..formatting import format_count, format_number
from .convergence import Convergence, convergence_of, fewest_allowed, read_convergence
from .grouping import GroupStats
from .quality import QualityStats

DEFAULT_QUALITY_TOLERANCE = 0.10  # MLPerf's runs to target spread 5-10 % (CV); one evaluation more is often 10 %
OK, WORSE, SUSPICIOUS = "ok   ", "WORSE", "SUSPICIOUS"
Entry = dict[str, Any]  # one target's quality in a gate file
MEDIAN_KEY = f"{SAMPLES_TO_TARGET_METRIC}_median"


def parse_quality_tolerance(value: object) -> float:
    try:
        tolerance = float(str(value).strip())
    except ValueError:
        tolerance = float("nan")
    if not math.isfinite(tolerance) or not 0 <= tolerance < 1:
        raise ConfigError("quality_tolerance", value, "allowed: a number from 0 to below 1, e.g. 0.1 (fail when the "
                                                      "target metric is 10 % worse or samples to target 10 % more)")
    return tolerance


def quality_entries(group: GroupStats) -> list[Entry]:
    """What a gate file holds of a cell's quality: one entry per target its runs had."""
    entries = []
    for stats in group.quality():
        target = stats.target
        if target is None:
            continue
        final = stats.final(target.metric)
        samples = stats.samples_to_target
        convergence = convergence_of(stats.reached_samples, max(stats.intervals, default=None))
        entries.append({
            "target": stats.key.target, "stop_at_target": stats.key.stops, "metric": target.metric,
            "final_median": final.median if final else None, "n": stats.n, "reached": stats.reached,
            "not_reached": stats.not_reached, MEDIAN_KEY: samples.median if samples else None,
            SAMPLES_TO_TARGET_METRIC: convergence.to_json() if convergence else None,  # MLPerf's reference point
            f"{SAMPLES_TO_TARGET_METRIC}_values": sorted(stats.reached_samples), "run_ids": stats.run_ids,
        })
    return entries


@dataclass(frozen=True)
class QualityCheck:
    """One quality verdict on one configuration: its line (key text first) and whether it passed."""

    where: str  # the configuration, as the gate's lines name it
    verdict: str  # OK, WORSE or SUSPICIOUS
    text: str

    @property
    def passed(self) -> bool:
        return self.verdict == OK

    def line(self) -> str:
        return f"  {self.verdict} {self.where}: {self.text}"


def _change(current: float, gated: float) -> str:
    return f"({(current / gated - 1) * 100:+.1f}% vs gate)" if gated else ""


def _final_check(where: str, entry: Entry, stats: QualityStats, tolerance: float) -> QualityCheck | None:
    target, gated = parse_target(entry["target"]), entry.get("final_median")
    final = stats.final(target.metric) if target else None
    if target is None or final is None or gated is None:
        return None
    factor = 1 - tolerance if target.higher_is_better else 1 + tolerance
    threshold = factor * float(gated)
    passed = final.median >= threshold if target.higher_is_better else final.median <= threshold
    sign = (">=" if passed else "<") if target.higher_is_better else ("<=" if passed else ">")
    text = (f"{target.metric} {format_number(final.median)} (median, n={final.n}) {sign} {factor:g} x "
            f"{format_number(gated)} = {format_number(threshold)} {_change(final.median, float(gated))}")
    return QualityCheck(where, OK if passed else WORSE, text)


def _samples_check(where: str, entry: Entry, stats: QualityStats, tolerance: float) -> QualityCheck | None:
    gated = entry.get(MEDIAN_KEY)
    if gated is None:
        return None
    samples, label = stats.samples_to_target, stats.key.label
    if samples is None:
        why = stats.invalid or f"{stats.reached} of {stats.tries} repeats reached it"
        return QualityCheck(where, WORSE, f"{label} not reached ({why}); the gate's runs reached it in "
                                          f"{format_count(float(gated))} samples (median)")
    threshold = (1 + tolerance) * float(gated)
    passed = samples.median <= threshold
    text = (f"{format_count(samples.median)} samples to {label} (median, n={samples.n}) {'<=' if passed else '>'} "
            f"{1 + tolerance:g} x {format_count(float(gated))} = {format_count(threshold)} "
            f"{_change(samples.median, float(gated))}")
    return QualityCheck(where, OK if passed else WORSE, text)


def _convergence_check(where: str, entry: Entry, stats: QualityStats) -> QualityCheck | None:
    reference = read_convergence(entry.get(SAMPLES_TO_TARGET_METRIC))
    current = convergence_of(stats.reached_samples)
    if reference is None or current is None or stats.not_reached:
        return None  # a set with a run that never got there did not converge faster
    fewest = fewest_allowed(reference, current.n)
    if fewest is None or current.mean >= fewest:
        return None
    return QualityCheck(where, SUSPICIOUS, (
        f"{format_count(current.mean)} samples to {stats.key.label} (mean, n={current.n}) < {format_count(fewest)}, "
        f"the fewest the gate's runs allow ({_reference_text(reference)}; MLPerf's one-sided t-test, alpha 0.05): "
        "learned faster than the reference did; check the eval data, the target and the seeds before trusting it"))


def _reference_text(reference: Convergence) -> str:
    return f"mean {format_count(reference.mean)}, sd {format_count(reference.std)}, n={reference.n}"


def check_quality(where: str, entries: list[Entry], group: GroupStats, tolerance: float) -> tuple[
        list[QualityCheck], list[str]]:
    """(checks, targets the gate has that this cell's runs did not run) for one gated configuration."""
    current = {(stats.key.target, stats.key.stops): stats for stats in group.quality()}
    checks: list[QualityCheck] = []
    missing = []
    for entry in entries:
        stats = current.get((str(entry.get("target", "")), bool(entry.get("stop_at_target", True))))
        if stats is None:
            missing.append(f"{where}: {entry.get('target')}")
            continue
        found = (_final_check(where, entry, stats, tolerance), _samples_check(where, entry, stats, tolerance),
                 _convergence_check(where, entry, stats))
        checks += [check for check in found if check is not None]
    return checks, missing
