"""What a train run learned, as compare reads it: its final eval metrics and, with a target, how it got there.

Runs logged before evaluations counted (or without a target) have no time to target: they show none, never zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..contract import (
    EVAL_SAMPLES_INTERVAL_METRIC,
    SAMPLES_TO_TARGET_METRIC,
    STEPS_TO_TARGET_METRIC,
    TARGET_BEST_METRIC,
    TARGET_METRICS,
    TARGET_REACHED_TAG,
    TARGET_TAG,
    TIME_TO_TARGET_METRIC,
    TIME_TO_TARGET_TRAIN_METRIC,
    TRUE_WORDS,
)
from ..errors import ConfigError
from ..target import Target, parse_target

STOP_PARAM = "stop_at_target"  # train's TrainConfig field, logged as a param

Finals = tuple[tuple[str, float], ...]  # ((eval metric, its final value), ...) in TARGET_METRICS order


@dataclass(frozen=True)
class QualityKey:
    """Which runs' quality can be pooled: the same target (or none), stopping at it or training on."""

    target: str = ""  # canonical spelling; "" without one
    stops: bool = True  # stop_at_target (always True without a target: nothing to stop at)

    @property
    def label(self) -> str:
        """`eval_recall_at_5>=0.2`, `... (trained on)` where the runs did not stop at it, `none`."""
        if not self.target:
            return "none"
        return self.target if self.stops else f"{self.target} (trained on)"

    def parsed(self) -> Target | None:
        return parse_target(self.target)

    def sort_key(self) -> tuple[bool, str, bool]:
        return (not self.target, self.target, not self.stops)


@dataclass(frozen=True)
class RunQuality:
    """One run's final eval metrics and time-to-target figures (None where the run did not log them)."""

    key: QualityKey = QualityKey()
    reached: bool | None = None  # None without a target
    time_to_target: float | None = None  # MLPerf's clock, evaluations included
    time_to_target_train: float | None = None
    samples_to_target: float | None = None
    steps_to_target: float | None = None
    best_value: float | None = None  # the best value of the target's metric any evaluation saw
    eval_samples_interval: float | None = None  # samples between evaluations (eval_steps > 0 only)
    finals: Finals = ()

    def final(self, metric: str) -> float | None:
        return dict(self.finals).get(metric)


def read_quality(params: Mapping[str, str], tags: Mapping[str, str], metrics: Mapping[str, float]) -> RunQuality:
    """A run's RunQuality from its params, tags and metrics; ValueError for a target train could not have written."""
    text = tags.get(TARGET_TAG) or params.get("target") or ""
    try:
        target = parse_target(text)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    finals = tuple((name, float(metrics[name])) for name in TARGET_METRICS if metrics.get(name) is not None)
    if target is None:
        return RunQuality(finals=finals)
    stops = str(params.get(STOP_PARAM, "true")).strip().lower() in TRUE_WORDS
    reached = tags.get(TARGET_REACHED_TAG, "").strip().lower() == "true" if TARGET_REACHED_TAG in tags else (
        metrics.get(SAMPLES_TO_TARGET_METRIC) is not None)
    return RunQuality(
        key=QualityKey(str(target), stops), reached=reached,
        time_to_target=_if(reached, metrics.get(TIME_TO_TARGET_METRIC)),
        time_to_target_train=_if(reached, metrics.get(TIME_TO_TARGET_TRAIN_METRIC)),
        samples_to_target=_if(reached, metrics.get(SAMPLES_TO_TARGET_METRIC)),
        steps_to_target=_if(reached, metrics.get(STEPS_TO_TARGET_METRIC)),
        best_value=metrics.get(TARGET_BEST_METRIC), eval_samples_interval=metrics.get(EVAL_SAMPLES_INTERVAL_METRIC),
        finals=finals,
    )


def _if(reached: bool, value: float | None) -> float | None:
    """A to-target figure counts only on a run that reached its target (MLPerf: a non-converged run has none)."""
    return float(value) if reached and value is not None else None
