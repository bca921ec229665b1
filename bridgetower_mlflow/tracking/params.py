"""Params: flatten, redact secrets (redact.py says which), fit MLflow's limits without dropping anything."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..contract import MAX_KEY, MAX_PARAM_VALUE, PARAMS_FILE, PARAMS_PER_BATCH
from ..environment import secret_values
from ..redact import REDACTED, is_secret

MAX_VALUE = MAX_PARAM_VALUE
BATCH = PARAMS_PER_BATCH
def flatten(value: object, prefix: str = "") -> dict[str, object]:
    """Nested dicts become dotted keys; lists stay as JSON values."""
    if isinstance(value, dict):
        out = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str)
    return str(value)


def prepare_params(params: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(loggable, full): redacted strings; loggable fits MLflow's key/value limits."""
    known = secret_values()
    full, loggable = {}, {}
    for key, value in flatten(params).items():
        text = _as_text(value)
        if is_secret(key, text, known):
            text = REDACTED
        full[key] = text
        digest = hashlib.sha1(key.encode()).hexdigest()[:8]
        short_key = key if len(key) <= MAX_KEY else key[: MAX_KEY - 9] + "~" + digest
        short = text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 40] + f"...[{len(text)} chars: {PARAMS_FILE}]"
        loggable[short_key] = short
    return loggable, full


def _unquote(text: str) -> str:
    """`mlflow run` logs string params shell-quoted ('' for empty, '--a b' for spaces)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def same_value(a: str, b: str) -> bool:
    """`mlflow run` logs raw -P strings first: 1e-5 == 1e-05, true == True, 2 == 2.0, '' == ''."""
    a, b = _unquote(a), _unquote(b)
    if a == b:
        return True
    lowered = {a.strip().lower(), b.strip().lower()}
    if lowered <= {"true", "1", "yes"} or lowered <= {"false", "0", "no", ""}:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def conflicts(existing: dict[str, str], new: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Keys whose already-logged value differs in meaning from the new one, old values redacted as new ones are
    (`mlflow run` logs the raw -P value, secrets included, before train redacts its own)."""
    known = secret_values()
    shown = {k: REDACTED if is_secret(k, _unquote(existing[k]), known) else existing[k] for k in new if k in existing}
    return {k: (shown[k], v) for k, v in new.items() if k in shown and not same_value(shown[k], v)}


def log_params(client: Any, run_id: str, params: dict[str, str], existing: dict[str, str]) -> int:
    """Log what is not yet on the run, in batches of 100; returns how many were sent."""
    from mlflow.entities import Param

    todo = [Param(k, v) for k, v in params.items() if k not in existing]
    for start in range(0, len(todo), BATCH):
        client.log_batch(run_id, params=todo[start:start + BATCH], synchronous=True)
    return len(todo)
