"""How steady the steps were: percentiles of the step time, its coefficient of variation, and the stalls."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from ..contract import (
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
