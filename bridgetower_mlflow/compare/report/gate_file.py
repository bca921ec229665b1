"""The gate file: what `compare --write-gate` writes and `compare --gate` reads back, checked to be one compare
wrote (the document and its verdict: analysis/gate.py)."""

from __future__ import annotations

import json
from pathlib import Path

from ...disk_space import writing
from ...errors import ConfigError
from ...target import parse_target
from ..analysis.gate import GATE_FORMAT, Document, gate_document
from ..comparison import Comparison

GATE_ALLOWED = "allowed: a JSON file written by `compare --write-gate`"


def gate_json(comparison: Comparison) -> str:
    """The gate file's text (also the compare run's gate artifact)."""
    return json.dumps(gate_document(comparison.sections, comparison.experiments), indent=2) + "\n"


def write_gate(comparison: Comparison, path: str) -> Path:
    """The gate file at `path` (`--write-gate`); a full disk is DiskFull's line, an unwritable path a ConfigError."""
    target = Path(path).expanduser()
    try:
        with writing("write_gate", "the gate file", target.parent):  # a full disk: exit 1, not bad input
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(gate_json(comparison), encoding="utf-8")
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
        and _is_quality(e.get("quality", [])) for e in entries)


def _is_quality(entries: object) -> bool:
    """A gate entry's quality: a list of targets compare wrote (gates from before time to quality have none)."""
    try:
        return isinstance(entries, list) and all(isinstance(e, dict) and parse_target(e["target"]) for e in entries)
    except (ConfigError, KeyError, TypeError):
        return False
