"""Regression gate: measured samples/s per configuration and accelerator, written and checked as JSON.

The rule is optimum-habana's CI rule: a configuration fails when its throughput falls below
tolerance x the gate's (0.95 there). Published rows are never part of a gate.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..contract import ACCELERATOR_TAG, DECODE_TAG, THROUGHPUT_METRIC
from ..disk_space import writing
from ..errors import ConfigError
from .comparison import Comparison
from .formatting import format_number
from .grouping import CONFIG_KEYS, SHORT_KEY_NAMES, GroupStats

GATE_FORMAT = "bridgetower-mlflow compare gate"
GATE_VERSION = 1
DEFAULT_TOLERANCE = 0.95
GATE_ALLOWED = "allowed: a JSON file written by `compare --write-gate`"
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


def _identity(key: GateKey) -> str:
    """The key as text; an empty value counts as absent, so a gate written before a key existed still matches."""
    return json.dumps({k: str(v) for k, v in key.items() if str(v) != ""}, sort_keys=True)


def measured_groups(comparison: Comparison) -> list[GroupStats]:
    return [g for s in comparison.sections if not s.published for row in s.rows for g in row.cells.values()]


def gate_document(comparison: Comparison) -> Document:
    """The JSON a gate file holds: one entry per measured cell, its median samples/s."""
    entries = [{"key": gate_key(g), "samples_per_second": g.median, "n": g.n, "min": g.minimum,
                "max": g.maximum, "run_ids": list(g.run_ids)} for g in measured_groups(comparison)]
    return {"format": GATE_FORMAT, "version": GATE_VERSION, "metric": THROUGHPUT_METRIC,
            "aggregate": "median", "experiments": list(comparison.experiments), "entries": entries}


def write_gate(comparison: Comparison, path: str) -> Path:
    target = Path(path).expanduser()
    try:
        with writing("write_gate", "the gate file", target.parent):  # a full disk: exit 1, not bad input
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(gate_document(comparison), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ConfigError("write_gate", path, f"allowed: a writable file path ({exc.strerror})") from None
    return target


def read_gate(path: str) -> Document:
    """A gate file's document; ConfigError when it is missing or not one compare wrote."""
    try:
        document = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError("gate", path, f"{GATE_ALLOWED} ({exc.strerror})") from None
    except ValueError:
        raise ConfigError("gate", path, f"{GATE_ALLOWED} (this one is not JSON)") from None
    if not _is_gate(document):
        raise ConfigError("gate", path, f"{GATE_ALLOWED} (format {GATE_FORMAT!r}, entries with key and samples/s)")
    return dict(document)


def _is_gate(document: object) -> bool:
    if not isinstance(document, dict) or document.get("format") != GATE_FORMAT:
        return False
    entries = document.get("entries")
    return isinstance(entries, list) and all(
        isinstance(e, dict) and isinstance(e.get("key"), dict) and isinstance(e.get("samples_per_second"), (int, float))
        for e in entries)


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

    @property
    def failed(self) -> list[GateCheck]:
        return [check for check in self.checks if not check.passed]

    def summary(self) -> str:
        verdict = f"FAILED, {len(self.failed)} below" if self.failed else "passed"
        return (f"Gate {self.path} (tolerance {self.tolerance:g}, medians of train_samples_per_second): {verdict}; "
                f"{len(self.checks)} checked, {len(self.missing)} in the gate but not here (not checked), "
                f"{len(self.new)} here but not in the gate.")

    def lines(self) -> list[str]:
        return [self.summary(), *(check.line() for check in self.checks),
                *(f"  not here: {key_text(key)}" for key in self.missing)]


def check_gate(comparison: Comparison, document: Document, tolerance: float, path: str) -> GateResult:
    """Match gated cells to measured ones; ConfigError when none of the gate's configurations is here."""
    current = {_identity(gate_key(g)): g for g in measured_groups(comparison)}
    entries = document["entries"]
    gated_ids = {_identity(entry["key"]) for entry in entries}
    checks = [GateCheck(entry["key"], float(entry["samples_per_second"]), current[_identity(entry["key"])], tolerance)
              for entry in entries if _identity(entry["key"]) in current]
    if not checks:
        first = key_text(entries[0]["key"]) if entries else "the gate is empty"
        raise ConfigError("gate", path, "allowed: a gate with configurations in this comparison; none of its "
                          f"{len(entries)} is here (first: {first})")
    return GateResult(path, tolerance, checks,
                      missing=[entry["key"] for entry in entries if _identity(entry["key"]) not in current],
                      new=[gate_key(g) for identity, g in current.items() if identity not in gated_ids])
