"""How steady the steps were: percentiles of the step time, its coefficient of variation, the stalls, and what
the steps that opened an epoch cost beyond the others (the Trainer's loader starts its workers again there)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from ...contract import (
    EPOCH_START_EXTRA_FRACTION_METRIC,
    EPOCH_START_EXTRA_SECONDS_METRIC,
    EPOCH_START_STEPS_METRIC,
    STALL_FACTOR,
    STEP_SECONDS_CV_METRIC,
    STEP_SECONDS_MAX_METRIC,
    STEP_SECONDS_P50_METRIC,
    STEP_SECONDS_P90_METRIC,
    STEP_SECONDS_P99_METRIC,
    STEP_STALLS_METRIC,
)


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` (0..1) percentile, interpolated linearly between the two nearest ranks (numpy's default)."""
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def step_spread(step_seconds: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max of the step time, its coefficient of variation, and the steps slower than twice the median."""
    if not step_seconds:
        return {}
    median = percentile(step_seconds, 0.5)
    mean = statistics.fmean(step_seconds)
    return {
        STEP_SECONDS_P50_METRIC: median,
        STEP_SECONDS_P90_METRIC: percentile(step_seconds, 0.9),
        STEP_SECONDS_P99_METRIC: percentile(step_seconds, 0.99),
        STEP_SECONDS_MAX_METRIC: max(step_seconds),
        STEP_SECONDS_CV_METRIC: statistics.pstdev(step_seconds) / mean if mean > 0 else 0.0,
        STEP_STALLS_METRIC: float(sum(1 for seconds in step_seconds if seconds > STALL_FACTOR * median)),
    }


def epoch_start_cost(step_seconds: Sequence[float], epoch_starts: Sequence[bool]) -> dict[str, float]:
    """The window's steps that opened an epoch: their count, their mean seconds beyond the median of the other
    steps, and that extra summed over the window's seconds; {} without both kinds of step in the window."""
    if not any(epoch_starts):  # also a window built without the flags
        return {}
    firsts = [seconds for seconds, first in zip(step_seconds, epoch_starts, strict=True) if first]
    others = [seconds for seconds, first in zip(step_seconds, epoch_starts, strict=True) if not first]
    total = sum(step_seconds)
    if not others or total <= 0:
        return {}
    median = percentile(others, 0.5)
    extra = sum(seconds - median for seconds in firsts)
    return {EPOCH_START_STEPS_METRIC: float(len(firsts)), EPOCH_START_EXTRA_SECONDS_METRIC: extra / len(firsts),
            EPOCH_START_EXTRA_FRACTION_METRIC: extra / total}
