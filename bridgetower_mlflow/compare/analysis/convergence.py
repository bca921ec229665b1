"""MLPerf's reference convergence point (RCP) check, pure: a run set that reaches the target in markedly fewer
samples than the reference did is suspicious (a leak, an easier eval set, a wrong target), not a speedup.

MLPerf (mlcommons/logging, rcp_checker.py): the reference's mean and standard deviation (numpy's np.std, the
population's) over its runs, both olympic (fastest and slowest dropped) from 5 runs; the smallest mean a one-sided
two-sample t-test with equal variances (scipy's ttest_ind_from_stats) at alpha 0.05 does not call smaller is the
fewest samples the reference allows; a run set whose mean (olympic from 5 runs) is below it fails. Here, as there,
the new set is assumed to spread like the reference, so that bound has a closed form. One addition: samples to
target are only known at evaluations, so a reference whose runs all reached it at the same evaluation (sd 0) is
given the spread of that rounding, interval / sqrt(12), instead of none.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .stats import OLYMPIC_MIN_RUNS

ALPHA = 0.05  # MLPerf's
MIN_REFERENCE_RUNS = 2  # a single run has no spread to test against


@dataclass(frozen=True)
class Convergence:
    """Samples to target of a run set, as the RCP check uses them."""

    mean: float  # olympic from 5 runs
    std: float  # population standard deviation of the runs the mean used
    n: int  # the runs the mean used
    interval: float | None = None  # samples between evaluations (the rounding of every value)

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "n": self.n, "interval": self.interval}


def convergence_of(values: Sequence[float], interval: float | None = None) -> Convergence | None:
    """The Convergence of reaching runs' samples to target; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    used = ordered[1:-1] if len(ordered) >= OLYMPIC_MIN_RUNS else ordered
    return Convergence(statistics.fmean(used), statistics.pstdev(used), len(used), interval)


def read_convergence(document: object) -> Convergence | None:
    """A gate file's convergence entry; None where it holds none (or not one compare wrote)."""
    if not isinstance(document, dict):
        return None
    try:
        interval = document.get("interval")
        return Convergence(float(document["mean"]), float(document["std"]), int(document["n"]),
                           None if interval is None else float(interval))
    except (KeyError, TypeError, ValueError):
        return None


def fewest_allowed(reference: Convergence, new_runs: int, alpha: float = ALPHA) -> float | None:
    """The smallest mean samples to target of `new_runs` runs that the one-sided t-test does not call smaller than
    the reference's; None where the reference has too few runs to test."""
    if reference.n < MIN_REFERENCE_RUNS or new_runs < 1:
        return None
    spread = max(reference.std, (reference.interval or 0.0) / math.sqrt(12))
    if spread == 0:
        return reference.mean  # MLPerf: a reference without spread allows nothing below its mean
    from scipy.stats import t  # only here: a gate with a reference convergence point is being checked

    quantile = float(t.ppf(1 - alpha, reference.n + new_runs - 2))
    return reference.mean - quantile * spread * math.sqrt(1 / reference.n + 1 / new_runs)
