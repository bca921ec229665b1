"""The quality target: one eval metric, one comparison, one value (`eval_recall_at_5>=0.2`). Stdlib only: the CLI
checks it before anything heavy loads, and compare reads it back from the runs' tags."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from .contract import LOWER_IS_BETTER, TARGET_METRICS
from .errors import ConfigError


@dataclass(frozen=True)
class Target:
    """A quality target: one eval metric, one comparison, one value (`eval_recall_at_5>=0.2`)."""

    metric: str
    comparison: str  # >=, >, <=, <
    value: float

    def __str__(self) -> str:
        return f"{self.metric}{self.comparison}{self.value!r}"

    @property
    def higher_is_better(self) -> bool:
        return self.comparison in (">=", ">")

    def reached(self, value: float | None) -> bool:
        if value is None or value != value:
            return False
        return {">=": value >= self.value, ">": value > self.value, "<=": value <= self.value,
                "<": value < self.value}[self.comparison]

    def better(self, value: float, than: float | None) -> bool:
        """`value` is better than `than` (None: nothing yet) by this target's direction."""
        if value != value:
            return False
        if than is None or than != than:
            return True
        return value > than if self.higher_is_better else value < than


_TARGET = re.compile(r"^\s*([A-Za-z_]\w*)\s*(>=|<=|>|<)\s*(\S+)\s*$")


def parse_target(text: str) -> Target | None:
    """`eval_recall_at_5>=0.20` (the `eval_` prefix may be left out); None for ""; ConfigError naming `target`."""
    text = str(text).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1].strip()  # MLflow's Kubernetes backend quotes each argument and no shell takes them off
    if not text:
        return None
    allowed = ("allowed: one eval metric, one comparison, one value, e.g. eval_recall_at_5>=0.20 or eval_loss<=1.5; "
               "metrics: " + ", ".join(TARGET_METRICS))
    match = _TARGET.match(text)
    if not match:
        raise ConfigError("target", text, allowed)
    name, comparison, raw = match.groups()
    metric = name if name.startswith("eval_") else f"eval_{name}"
    if metric not in TARGET_METRICS:
        raise ConfigError("target", text, allowed)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError("target", text, allowed) from None
    if not math.isfinite(value):
        raise ConfigError("target", text, "allowed: a finite value")
    lower = metric in LOWER_IS_BETTER
    if lower != (comparison in ("<=", "<")):
        better = "lower" if lower else "higher"
        raise ConfigError("target", text, f"allowed: {metric}{'<=' if lower else '>='}VALUE ({better} is better)")
    if not lower and not 0.0 <= value <= 1.0:
        raise ConfigError("target", text, f"allowed: a value from 0 to 1 ({metric} is a share)")
    if lower and value < 0:
        raise ConfigError("target", text, "allowed: a value >= 0 (a loss)")
    return Target(metric, comparison, value)


def quality_target(field_name: str, value: Any) -> str:
    """The target's canonical spelling ("" for none)."""
    target = parse_target(value)
    return "" if target is None else str(target)
