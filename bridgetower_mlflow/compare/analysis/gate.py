"""Regression gate, pure: measured samples/s per configuration and accelerator as a gate's document, and the
verdict of a comparison against one (the file itself: report/gate_file.py).

The rule is optimum-habana's CI rule: a configuration fails when its throughput falls below
tolerance x the gate's (0.95 there). Published rows are never part of a gate. Where runs had a target, each
entry also holds its quality, checked by quality_gate.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...contract import ACCELERATOR_TAG, DECODE_TAG, THROUGHPUT_METRIC
from ...errors import ConfigError
from ..formatting import format_number
from .grouping import CONFIG_KEYS, SHORT_KEY_NAMES, GroupStats
from .quality_gate import DEFAULT_QUALITY_TOLERANCE, SUSPICIOUS, QualityCheck, check_quality, quality_entries
from .speedups import ConfigSection

GATE_FORMAT = "bridgetower-mlflow compare gate"
GATE_VERSION = 1
DEFAULT_TOLERANCE = 0.95
GateKey = dict[str, Any]  # accelerator, setting, warmup and configuration of one gated cell
Document = dict[str, Any]  # a gate file's JSON


def gate_key(group: GroupStats) -> GateKey:
    """What identifies a gated cell: accelerator, data-loading setting, warmup rule, configuration."""
    return {ACCELERATOR_TAG: group.accelerator, "dataloader_num_workers": group.setting.workers,
            DECODE_TAG: group.setting.decode, "throughput_warmup_steps": group.warmup,
            **{key: group.config[key] for key in CONFIG_KEYS}}


def key_text(key: GateKey) -> str:
    """`cpu w0 decode=cpu | model=tiny, ..., warmup steps=3` for the gate's report lines."""
    config = ", ".join(f"{SHORT_KEY_NAMES.get(k, k)}={key[k]}" for k in CONFIG_KEYS if key.get(k, "") != "")
    return (f"{key.get(ACCELERATOR_TAG)} w{key.get('dataloader_num_workers')} decode={key.get(DECODE_TAG)} | "
            f"{config}, warmup steps={key.get('throughput_warmup_steps')}")


def matches(gated: GateKey, current: GateKey) -> bool:
    """The gated cell is this one. An empty value counts as absent on both sides, and a key the gate's entry does
    not hold at all is not compared: a gate written before that key existed (hf_args, per_device_eval_batch_size)
    still checks its cells."""
    return all(str(gated[k]) == str(current.get(k, "")) for k in gated)


def measured_groups(sections: Sequence[ConfigSection]) -> list[GroupStats]:
    return [g for s in sections if not s.published for row in s.rows for g in row.cells.values()]


def gate_document(sections: Sequence[ConfigSection], experiments: Sequence[str]) -> Document:
    """The JSON a gate file holds: one entry per measured cell, its median samples/s."""
    entries = [{"key": gate_key(g), "samples_per_second": g.median, "n": g.n, "min": g.minimum,
                "max": g.maximum, "run_ids": list(g.run_ids), "quality": quality_entries(g)}
               for g in measured_groups(sections)]
    return {"format": GATE_FORMAT, "version": GATE_VERSION, "metric": THROUGHPUT_METRIC,
            "aggregate": "median", "experiments": list(experiments), "entries": entries}


def parse_tolerance(value: object) -> float:
    try:
        tolerance = float(str(value).strip())
    except ValueError:
        tolerance = float("nan")
    if not math.isfinite(tolerance) or tolerance <= 0:
        raise ConfigError("tolerance", value, "allowed: a number > 0, e.g. 0.95 (fail below 0.95 x the gate)")
    return tolerance


@dataclass(frozen=True)
class GateCheck:
    key: GateKey
    gated: float
    current: GroupStats
    tolerance: float

    @property
    def threshold(self) -> float:
        return self.tolerance * self.gated

    @property
    def passed(self) -> bool:
        return self.current.median >= self.threshold

    def line(self) -> str:
        change = (self.current.median / self.gated - 1) * 100 if self.gated else 0.0
        verdict, sign = ("ok   ", ">=") if self.passed else ("BELOW", "<")
        return (f"  {verdict} {key_text(self.key)}: {format_number(self.current.median)} samples/s (n={self.current.n})"
                f" {sign} {self.tolerance:g} x {format_number(self.gated)} = {format_number(self.threshold)}"
                f" ({change:+.1f}% vs gate)")


@dataclass(frozen=True)
class GateResult:
    """Checks of every gated configuration found now; what the gate has that this comparison lacks."""

    path: str
    tolerance: float
    checks: list[GateCheck] = field(default_factory=list)
    missing: list[GateKey] = field(default_factory=list)
    new: list[GateKey] = field(default_factory=list)
    quality: list[QualityCheck] = field(default_factory=list)
    quality_tolerance: float = DEFAULT_QUALITY_TOLERANCE
    quality_missing: list[str] = field(default_factory=list)  # gated targets whose configuration ran none here

    @property
    def failed(self) -> list[GateCheck]:
        return [check for check in self.checks if not check.passed]

    @property
    def quality_failed(self) -> list[QualityCheck]:
        return [check for check in self.quality if not check.passed]

    @property
    def passed(self) -> bool:
        return not self.failed and not self.quality_failed

    def summary(self) -> str:
        verdict = f"FAILED, {len(self.failed)} below" if self.failed else "passed"
        return (f"Gate {self.path} (tolerance {self.tolerance:g}, medians of train_samples_per_second): {verdict}; "
                f"{len(self.checks)} checked, {len(self.missing)} in the gate but not here (not checked), "
                f"{len(self.new)} here but not in the gate.")

    def quality_summary(self) -> str:
        """The quality verdict in one line ('' where the gate holds no target this comparison ran)."""
        if not self.quality and not self.quality_missing:
            return ""
        worse = sum(1 for check in self.quality_failed if check.verdict != SUSPICIOUS)
        suspicious = len(self.quality_failed) - worse
        verdict = f"FAILED, {worse} worse, {suspicious} suspicious" if self.quality_failed else "passed"
        return (f"Quality (tolerance {self.quality_tolerance:g}: the median final target metric at most that much "
                f"worse, the median samples to target at most that much more; no convergence markedly faster than "
                f"the gate's runs): {verdict}; {len(self.quality)} checked, {len(self.quality_missing)} gated targets "
                "not run here (not checked).")

    def failure_message(self) -> str:
        """The one error line of a failed gate."""
        below = f"{len(self.failed)} of {len(self.checks)} configurations below {self.tolerance:g} x {self.path}"
        parts = [below] if self.failed or not self.quality_failed else []
        if self.quality_failed:
            parts.append(f"{len(self.quality_failed)} of {len(self.quality)} quality checks failed against "
                         f"{self.path} (worse by more than {self.quality_tolerance:g}, or suspicious)")
        return "gate: " + "; ".join(parts)

    def failed_lines(self) -> list[str]:
        return [check.line() for check in self.failed] + [check.line() for check in self.quality_failed]

    def lines(self) -> list[str]:
        quality = self.quality_summary()
        return [self.summary(), *(check.line() for check in self.checks),
                *(f"  not here: {key_text(key)}" for key in self.missing),
                *([quality] if quality else []), *(check.line() for check in self.quality),
                *(f"  target not run here: {where}" for where in self.quality_missing)]


def check_gate(sections: Sequence[ConfigSection], document: Document, tolerance: float, path: str,
               quality_tolerance: float = DEFAULT_QUALITY_TOLERANCE) -> GateResult:
    """Match gated cells to a comparison's measured ones; ConfigError when none of the gate's configurations is here."""
    current = [(gate_key(g), g) for g in measured_groups(sections)]
    entries = document["entries"]
    found = [(entry, group) for entry in entries for key, group in current if matches(entry["key"], key)]
    if not found:
        first = key_text(entries[0]["key"]) if entries else "the gate is empty"
        raise ConfigError("gate", path, "allowed: a gate with configurations in this comparison; none of its "
                          f"{len(entries)} is here (first: {first})")
    quality: list[QualityCheck] = []
    quality_missing: list[str] = []
    for entry, group in found:
        checks, missing = check_quality(key_text(gate_key(group)), entry.get("quality", []), group, quality_tolerance)
        quality += checks
        quality_missing += missing
    matched = {id(entry) for entry, _ in found}
    checked = {id(group) for _, group in found}
    return GateResult(path, tolerance, [GateCheck(entry["key"], float(entry["samples_per_second"]), group, tolerance)
                                        for entry, group in found],
                      missing=[entry["key"] for entry in entries if id(entry) not in matched],
                      new=[key for key, group in current if id(group) not in checked],
                      quality=quality, quality_tolerance=quality_tolerance, quality_missing=quality_missing)
