"""Pure quality statistics of a cell's repeats, one set per target: final eval metrics, and time to target the
MLPerf way (a repeat that did not reach the target is a non-converged run: one is dropped as the slowest, two make
the cell invalid)."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ...target import Target
from .runs import QualityKey, RunQuality
from .stats import INVALID_FROM, olympic_mean


@dataclass(frozen=True)
class Spread:
    """Repeats of one figure: median, n, min-max, and MLPerf's olympic mean where there are enough runs."""

    median: float
    n: int
    minimum: float
    maximum: float
    olympic: float | None = None


def spread_of(values: Sequence[float], not_reached: int = 0) -> Spread | None:
    """The Spread of the values (None for none). For figures where lower is faster (seconds, samples):
    `not_reached` runs count in the olympic mean as the slowest, so the fastest is still dropped."""
    if not values:
        return None
    olympic = olympic_mean([-value for value in values], failed=not_reached)  # olympic_mean's slowest is its lowest
    return Spread(statistics.median(values), len(values), min(values), max(values),
                  None if olympic is None else -olympic)


@dataclass(frozen=True)
class QualityStats:
    """One cell's repeats with one QualityKey (a target, or none): what they learned and how long it took."""

    key: QualityKey
    runs: tuple[tuple[str, RunQuality], ...]  # (run id, its quality)
    failed: int = 0  # failed sweep repeats of the cell: they never reached the target

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def run_ids(self) -> list[str]:
        return [run_id for run_id, _ in self.runs]

    @property
    def target(self) -> Target | None:
        return self.key.parsed()

    @property
    def reached(self) -> int:
        return sum(1 for _, run in self.runs if run.reached)

    @property
    def not_reached(self) -> int:
        """Repeats that did not reach the target: finished without it, or failed (0 without a target)."""
        if not self.key.target:
            return 0
        return sum(1 for _, run in self.runs if run.reached is False) + self.failed

    @property
    def tries(self) -> int:
        return self.n + (self.failed if self.key.target else 0)

    @property
    def invalid(self) -> str:
        """Why its time to target is invalid ('' when it is not): two or more repeats did not reach the target."""
        if self.not_reached < INVALID_FROM:
            return ""
        return f"{self.not_reached} of {self.tries} repeats did not reach {self.key.target}"

    def final(self, metric: str) -> Spread | None:
        """The final value of one eval metric over the repeats that logged it (median, n, min-max)."""
        found = spread_of([value for _, run in self.runs if (value := run.final(metric)) is not None])
        return None if found is None else dataclasses.replace(found, olympic=None)

    def _to_target(self, values: list[float | None]) -> Spread | None:
        if not self.key.target or self.invalid:
            return None
        return spread_of([value for value in values if value is not None], self.not_reached)

    @property
    def samples_to_target(self) -> Spread | None:
        """Samples to target over the repeats that reached it; None without a target or when invalid."""
        return self._to_target([run.samples_to_target for _, run in self.runs])

    @property
    def time_to_target(self) -> Spread | None:
        """Seconds to target on MLPerf's clock (evaluations included) over the repeats that reached it."""
        return self._to_target([run.time_to_target for _, run in self.runs])

    @property
    def reached_samples(self) -> list[float]:
        """Each reaching repeat's samples to target (the gate's reference convergence points)."""
        return [run.samples_to_target for _, run in self.runs if run.samples_to_target is not None]

    @property
    def intervals(self) -> list[float]:
        """The evaluation intervals in samples its repeats used (several: they were not evaluated alike)."""
        return sorted({run.eval_samples_interval for _, run in self.runs if run.eval_samples_interval is not None})

    @property
    def best_value(self) -> float | None:
        """The best value of the target's metric any evaluation of any repeat saw."""
        target = self.target
        best: float | None = None
        for _, run in self.runs:
            if target is not None and run.best_value is not None and target.better(run.best_value, best):
                best = run.best_value
        return best

    @property
    def compared_metrics(self) -> tuple[str, ...]:
        """The final metrics that say whether two cells learned alike: the target's, else every eval metric."""
        target = self.target
        if target is not None:
            return (target.metric,)
        return tuple(dict.fromkeys(name for _, run in self.runs for name, _ in run.finals))


def quality_groups(qualities: Sequence[tuple[str, RunQuality]], failed: int = 0) -> list[QualityStats]:
    """A cell's repeats grouped by QualityKey, targets first. The cell's failed sweep repeats count as not
    reached where every finished repeat had the same target (a sweep passes one target to every cell)."""
    grouped: dict[QualityKey, list[tuple[str, RunQuality]]] = {}
    for run_id, quality in qualities:
        grouped.setdefault(quality.key, []).append((run_id, quality))
    single = len(grouped) == 1
    return [QualityStats(key, tuple(runs), failed if single and key.target else 0)
            for key, runs in sorted(grouped.items(), key=lambda item: item[0].sort_key())]
