"""hf_args as shell words: a flag whose name says it holds a secret is refused without echoing its value."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from typing import Any

from .errors import ConfigError
from .redact import secret_name

_FLAG = re.compile(r"(?<![^\s'\"])--?[A-Za-z][\w.-]*")


def secret_flag(word: str) -> bool:
    """`--hub_token`, `--api-key=...`: a flag whose name says it holds a secret (redact.py's vocabulary)."""
    return word.startswith("-") and secret_name(word)


def secret_flag_refusal(name: str, text: str, words: Iterable[str]) -> ConfigError | None:
    """The refusal of the first secret flag in `words`; from that flag's value on, the message shows ***."""
    flag = next((word.split("=", 1)[0] for word in words if secret_flag(word)), None)
    if flag is None:
        return None
    cut = next((m.end() for m in _FLAG.finditer(text) if secret_flag(m.group(0))), 0)
    shown = text[:cut] + ("=***" if text[cut:].startswith("=") else " ***") if cut else "***"
    where = ("set the HF_TOKEN environment variable" if re.search("hub|hf", flag, re.IGNORECASE)
             else f"put {flag}'s value in the environment variable its library reads")
    return ConfigError(name, shown, f"allowed: flags without secrets (MLflow stores every -P value in plain "
                                    f"text); {where} instead")


def shell_words(name: str, value: Any) -> tuple[str, ...]:
    """hf_args as words; a flag carrying a secret is refused without echoing its value."""
    text = value if isinstance(value, str) else shlex.join(value)
    try:
        words = tuple(shlex.split(text)) if isinstance(value, str) else tuple(value)
    except ValueError as exc:
        refused = secret_flag_refusal(name, text, _FLAG.findall(text))
        raise refused or ConfigError(name, text, f"allowed: shell-quoted --flag value pairs ({exc})") from None
    refused = secret_flag_refusal(name, text, words)
    if refused:
        raise refused
    if words and not words[0].startswith("--"):
        raise ConfigError(name, text, "allowed: shell-quoted --flag value pairs, starting with a --flag")
    return words


def canonical_hf_args(text: str) -> str:
    """`--b 2 --a=True` -> `--a=true --b=2`: the same flags however spelled; text that does not split, as given."""
    try:
        words = shlex.split(text)
    except ValueError:
        return text.strip()
    flags: list[str] = []
    for word in words:
        if flags and not word.startswith("--") and "=" not in flags[-1]:
            flags[-1] += f"={word}"  # a flag's value
        else:
            flags.append(word)
    return " ".join(sorted(re.sub(r"=(true|false)$", lambda m: m.group(0).lower(), flag, flags=re.IGNORECASE)
                           for flag in flags))
