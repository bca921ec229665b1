"""The stubs' configuration file: `key=value` lines that the C side reads again at every call."""

from __future__ import annotations

import os
from pathlib import Path


def write_config(path: Path, system: dict, devices: list[dict], migs: list[dict] = ()) -> None:
    """Replace the file atomically: a call in another thread reads the old table or the new one, never half."""
    lines = [f"{key}={value}" for key, value in system.items() if value is not None]
    lines += [f"devices={len(devices)}", f"migs={len(migs)}"]
    for scope, table in (("device", devices), ("mig", migs)):
        for number, fields in enumerate(table):
            lines += [f"{scope}.{number}.{key}={_text(value)}" for key, value in fields.items()]
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text("\n".join(lines) + "\n")
    os.replace(partial, path)


def _text(value) -> str:
    if isinstance(value, (set, frozenset, list, tuple)):
        return ",".join(sorted(value))
    return str(int(value)) if isinstance(value, float) else str(value)


def read_calls(path: Path) -> list[str]:
    """The C functions called so far, in order (the stub appends one line per call)."""
    return path.read_text().split() if path.exists() else []
