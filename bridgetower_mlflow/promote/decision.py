"""Gated promotion: move a registry alias to a candidate version only if its metric beats the holder's.

`decide` is pure; `promote` reads the registry, decides, and (unless dry run) moves the alias and
records the decision as version tags plus one line in the registered model's description.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..contract import CAPTION_MATCH_METRIC, EVAL_FINGERPRINT_TAG
from ..errors import ConfigError

DEFAULT_METRIC = CAPTION_MATCH_METRIC
FINGERPRINT_TAG = EVAL_FINGERPRINT_TAG
RESERVED_ALIAS = re.compile(r"(latest|v\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class VersionFacts:
    """What a decision needs to know about one version."""

    version: str
    value: float
    eval_fingerprint: str | None = None


@dataclass(frozen=True)
class Gate:
    """The rule a candidate must pass: beat @alias's holder on `metric` by at least `min_delta`."""

    alias: str
    metric: str
    mode: str  # max: higher is better; min: lower is better
    min_delta: float = 0.0
    allow_different_data: bool = False


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str
    gate: Gate
    candidate: VersionFacts
    holder: VersionFacts | None
    decided_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def alias(self) -> str:
        return self.gate.alias

    @property
    def metric(self) -> str:
        return self.gate.metric

    @property
    def changes_nothing(self) -> bool:
        """The candidate already holds the alias: nothing to move and nothing to record."""
        return self.holder is not None and self.holder.version == self.candidate.version


def check_alias(alias: str) -> str:
    if not alias or RESERVED_ALIAS.fullmatch(alias):
        raise ConfigError("alias", alias, "allowed: any name except 'latest' and v<digits> (reserved by MLflow)")
    return alias


def resolve_mode(metric: str, mode: str) -> str:
    """`auto`: lower is better for losses and errors, higher for everything else."""
    if mode in ("max", "min"):
        return mode
    if mode != "auto":
        raise ConfigError("mode", mode, "allowed: max, min or auto")
    return "min" if re.search(r"(loss|error|perplexity)$", metric) else "max"


def _data_mismatch(candidate: VersionFacts, holder: VersionFacts) -> str | None:
    missing = [f.version for f in (candidate, holder) if not f.eval_fingerprint]
    if missing:
        return (f"cannot tell whether both were evaluated on the same data: "
                f"version {missing[0]} has no {FINGERPRINT_TAG} tag")
    if candidate.eval_fingerprint != holder.eval_fingerprint:
        return (f"eval data differ (version {candidate.version}: {candidate.eval_fingerprint}, "
                f"version {holder.version}: {holder.eval_fingerprint})")
    return None


def decide(candidate: VersionFacts, holder: VersionFacts | None, gate: Gate) -> Decision:
    """Promote when there is no holder, or the candidate beats the holder by at least min_delta (> 0)."""
    alias, metric, mode, min_delta = gate.alias, gate.metric, gate.mode, gate.min_delta

    def verdict(promote: bool, reason: str) -> Decision:
        return Decision(promote, reason, gate, candidate, holder)

    if holder is None:
        return verdict(True, f"no version holds @{alias}")
    if holder.version == candidate.version:
        return verdict(False, f"version {candidate.version} already holds @{alias}")
    mismatch = _data_mismatch(candidate, holder)
    if mismatch and not gate.allow_different_data:
        return verdict(False, f"{mismatch}; metrics not compared (--allow-different-data compares anyway)")
    gain = candidate.value - holder.value if mode == "max" else holder.value - candidate.value
    compared = (f"{metric} {candidate.value:.6g} vs {holder.value:.6g} of version {holder.version} "
                f"({'higher' if mode == 'max' else 'lower'} is better, min_delta {min_delta:g})")
    # A tiny tolerance so that 0.16 - 0.15 still counts as beating by 0.01.
    if gain > 0 and gain >= min_delta - 1e-12:
        return verdict(True, f"{compared}: better by {abs(gain):.6g}")
    return verdict(False, f"{compared}: {'not better' if gain <= 0 else f'better by only {gain:.6g}'}")


def format_value(value: float | None) -> str:
    return "" if value is None else f"{value:.10g}"


def decision_tags(decision: Decision) -> dict[str, str]:
    """The version tags that record a decision on the candidate."""
    holder = decision.holder
    return {
        "promotion.decision": "promoted" if decision.promote else "not_promoted",
        "promotion.decided_at": decision.decided_at,
        "promotion.promoted_at": decision.decided_at if decision.promote else "",
        "promotion.alias": decision.alias,
        "promotion.previous_version": holder.version if holder else "",
        "promotion.metric": decision.metric,
        "promotion.mode": decision.gate.mode,
        "promotion.min_delta": f"{decision.gate.min_delta:g}",
        "promotion.candidate_value": format_value(decision.candidate.value),
        "promotion.holder_value": format_value(holder.value if holder else None),
        "promotion.reason": decision.reason[:5000],
    }


def description_line(decision: Decision) -> str:
    """One line for the registered model's description (its promotion history)."""
    verb = "promoted to" if decision.promote else "not promoted to"
    return f"- {decision.decided_at} version {decision.candidate.version} {verb} @{decision.alias}: {decision.reason}"


def metric_value(value: str | float | None) -> float | None:
    """A float, or None for a missing, unparsable or NaN value."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number
