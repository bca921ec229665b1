"""The one secret vocabulary (names, values) and the one way to show an error. Stdlib only.

Params, tags, descriptions, error messages and hf_args flags are all judged by the same words; the values of the
environment's secret variables (environment.SECRET_VARIABLES) are redacted wherever they appear.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .environment import secret_values

REDACTED = "***"
# a name that says it holds a secret: `hub_token`, `api-key`, `db_password`, `client_secret`, `Authorization`
SECRET_NAME = re.compile(
    r"(?i)(passw(or)?d|passwd|secret|credential|api[_-]?key|access[_-]?key|private[_-]?key|(^|[._-])key$|"
    r"auth(orization)?([_-]?header)?$|(^|[._-])token$|bearer)"
)
# a value that is a secret whatever it is called: Hub, GitHub, OpenAI, AWS, JWT, bearer and Slack tokens
SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|sk-[A-Za-z0-9_-]{20,}|"
    r"AKIA[0-9A-Z]{16}|eyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,}|(?i:bearer)\s+\S{8,}|"
    r"xox[bpas]-[\w-]{10,})"
)
# user:password@ in any URI, all of the password: SQLAlchemy reads it up to the first @ (a / allowed in it),
# requests up to the last @ before the host's /
URL_USERINFO = re.compile(r"(?<=://)(?P<user>[^:/\s@]*):(?:[^\s/?#]*@|[^\s@]*@)")
URL_QUERY_VALUE = re.compile(r"(?<=[?&])(?P<name>[^=&\s#]+)=(?P<value>[^&\s#]+)")  # ?password=... judged by name
EMPTY_VALUES = ("", "None", "null", "[]", "{}")


def secret_name(name: str) -> bool:
    """True for a key or flag name that says it holds a secret (`--hub_token` -> hub_token)."""
    return bool(SECRET_NAME.search(name.lstrip("-").split("=", 1)[0]))


def is_secret(key: str, text: str, known: list[str]) -> bool:
    """A param is secret by its name (when it holds anything), by its value's shape, or by a known secret."""
    if secret_name(key) and text not in EMPTY_VALUES:
        return True
    return redact_text(text, known) != text


def _redact(text: str, known: list[str], userinfo: str | Callable[[re.Match[str]], str]) -> str:
    for secret in known:
        text = text.replace(secret, REDACTED)
    text = URL_QUERY_VALUE.sub(lambda m: f"{m['name']}={REDACTED}" if secret_name(m["name"]) else m[0],
                               SECRET_VALUE.sub(REDACTED, text))
    return URL_USERINFO.sub(userinfo, text)


def redact_text(text: str, known: list[str] | None = None) -> str:
    """Replace token-, password- or key-like parts of free text (descriptions, logs, URIs) by ***."""
    return _redact(text, secret_values() if known is None else known, REDACTED + "@")


def without_password(uri: str) -> str:
    """A URI for a command the user runs: `user:***@`, the user name kept so they know whose password goes there."""
    return _redact(uri, secret_values(), lambda m: f"{m['user']}:{REDACTED}@")


def first_line(exc: BaseException, limit: int = 2000) -> str:  # contract.ERROR_TAG_LIMIT
    """An exception as one redacted line: its first line of text, or its type's name when it has none."""
    return redact_text((str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit])
