"""The free-text fields' parsers: each takes what the code behind it takes (a model or dataset source, a folder,
a name MLflow or the file system keeps), so a value that passes is one that works. Stdlib only."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .contract import EXPERIMENT_NAME_LIMIT, HUB_ID_LIMIT, NAME_BYTES_LIMIT, PATH_BYTES_LIMIT, RUN_NAME_LIMIT
from .errors import ConfigError

Parser = Callable[[str, Any], Any]
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*", re.ASCII)  # owner/name, as the Hub spells ids
RUN_ID = re.compile(r"[A-Za-z0-9][\w-]{0,255}", re.ASCII)  # MLflow's own run id check


def is_hub_id(text: str) -> bool:
    return len(text) <= HUB_ID_LIMIT and HUB_ID.fullmatch(text) is not None and ".." not in text \
        and "--" not in text and not text.endswith(".git")


def source(names: tuple[str, ...], what: str) -> Parser:
    """One of `names`, an existing local path or a Hub id (owner/name); anything else is refused here, before the
    libraries try it (an id they cannot find offline still fails later, with their reason)."""
    allowed = f"allowed: {', '.join(names)}, {what}"

    def parse(name: str, value: Any) -> str:
        text = str(value).strip()
        if text in names or is_hub_id(text):
            return text
        try:
            exists = bool(text) and "\0" not in text and Path(text).expanduser().exists()
        except OSError:  # a name too long for the file system
            exists = False
        if not exists:
            raise ConfigError(name, value, allowed + (" (no such path here)" if _looks_like_path(text) else ""))
        return text

    return parse


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", ".", "~")) or "/" in text


def bounded_text(limit: int, what: str) -> Parser:
    """Stripped text of at most `limit` characters (empty allowed: the default)."""
    def parse(name: str, value: Any) -> str:
        text = str(value).strip()
        if len(text) > limit:
            raise ConfigError(name, value, f"allowed: at most {limit} characters ({what})")
        return text

    return parse


def column(name: str, value: Any) -> str:
    """A dataset column's name (whether the dataset has it is checked once it is loaded)."""
    text = str(value).strip()
    if not text:
        raise ConfigError(name, value, "allowed: the name of a column of the dataset")
    return text


def folder(name: str, value: Any) -> str:
    """A folder path the file system can hold: each name at most 255 bytes, the whole at most 4096."""
    text = str(value)
    encoded = text.encode("utf-8", "surrogateescape")
    if not text.strip() or "\0" in text:
        raise ConfigError(name, value, "allowed: a folder path")
    if len(encoded) > PATH_BYTES_LIMIT or any(len(part.encode("utf-8", "surrogateescape")) > NAME_BYTES_LIMIT
                                              for part in text.split("/")):
        raise ConfigError(name, value, f"allowed: a folder path of at most {PATH_BYTES_LIMIT} bytes, each name "
                                       f"at most {NAME_BYTES_LIMIT} (the file system's limits)")
    return text


def run_id(name: str, value: Any) -> str:
    """Empty, or an MLflow run id."""
    text = str(value).strip()
    if text and not RUN_ID.fullmatch(text):
        raise ConfigError(name, value, "allowed: an MLflow run id (letters, digits, '_' and '-', at most 256)")
    return text


def register_name(field_name: str, value: Any) -> str:
    """Empty, or a registered-model name."""
    name = str(value).strip()
    if name and (len(name) > 250 or any(c in name for c in "/:@%\\") or ".." in name):
        raise ConfigError(field_name, name, "allowed: a registered-model name of at most 250 characters without "
                                            "'/', ':', '@', '%', '\\' or '..'")
    return name


RUN_NAME = bounded_text(RUN_NAME_LIMIT, "the tracking store's run names")
EXPERIMENT_NAME = bounded_text(EXPERIMENT_NAME_LIMIT, "a PostgreSQL store's experiment names")
DATASET_CONFIG = bounded_text(NAME_BYTES_LIMIT, "the datasets cache keeps it as a folder name")
