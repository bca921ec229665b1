"""One owner per setting: the TrainingArguments flags hf_args may not set, and what sets each instead.

A train option owns the flag of its own name and the flags its schema entry declares (`owns`: what it sets under
another name); the project owns the flags it sets for its own reasons. Stdlib only: hf_args is refused while the
config is built, before torch, transformers or mlflow load and before any run exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import Field
from typing import Any

from .errors import ConfigError

PROJECT_REASON = "the project sets it: "
CARRIER = "hf_args"  # the field that carries the flags owns none of them
PROJECT_FLAGS = {
    "report_to": "its callback owns what is logged; transformers' MLflowCallback, WandbCallback ... stay off",
    "remove_unused_columns": "the collator needs every column",
    "ignore_data_skip": "on a resume the project's loader skips the trained batches itself",
}


def option_flag(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def flag_owners(schema: Iterable[Field[Any]]) -> dict[str, str]:
    """TrainingArguments flag -> what sets it instead: `--option` for a train option's, the reason for the
    project's own."""
    owners = {}
    for spec in schema:
        if spec.name != CARRIER:
            owners.update(dict.fromkeys((spec.name, *spec.metadata.get("owns", ())), option_flag(spec.name)))
    owners.update({flag: PROJECT_REASON + why for flag, why in PROJECT_FLAGS.items()})
    return owners


def flag_name(word: str) -> str:
    """The field a word sets as HfArgumentParser reads it: `--per-device-x=4` -> per_device_x; not a flag: ''."""
    return word[2:].split("=", 1)[0].replace("-", "_") if word.startswith("--") else ""


def owner_of(word: str, owners: dict[str, str]) -> tuple[str, str] | None:
    """(flag, owner) when `word` sets an owned flag, `--no_<flag>` (a true-by-default flag's off switch) included."""
    name = flag_name(word)
    for flag in (name, name.removeprefix("no_")):
        if flag and flag in owners:
            return flag, owners[flag]
    return None


def refuse_owned_flags(field_name: str, words: Sequence[str], owners: dict[str, str]) -> None:
    """ConfigError for the first word of `words` that sets a flag an option or the project owns."""
    for index, word in enumerate(words):
        owned = owner_of(word, owners)
        if owned is None:
            continue
        flag, owner = owned
        following = words[index + 1] if index + 1 < len(words) else ""
        shown = f"{word} {following}" if following and "=" not in word and not following.startswith("--") else word
        allowed = (f"allowed: flags no train option owns (one owner per setting): use {owner} instead"
                   if owner.startswith("--") else f"allowed: flags the project does not set: {flag} is set by the "
                                                  f"project ({owner.removeprefix(PROJECT_REASON)})")
        raise ConfigError(field_name, shown, allowed)


def owned_flags_help(schema: Iterable[Field[Any]]) -> str:
    """The hf_args help's list of what it may not set, with the option (or the project's reason) for each."""
    by_owner: dict[str, list[str]] = {}
    for flag, owner in flag_owners(schema).items():
        if owner != option_flag(flag):  # an option's own name: the rule's first part says it
            by_owner.setdefault(owner, []).append("--" + flag)
    options = [f"{', '.join(flags)} ({owner})" for owner, flags in by_owner.items() if owner.startswith("--")]
    project = [f"{flags[0]} ({owner.removeprefix(PROJECT_REASON)})" for owner, flags in by_owner.items()
               if not owner.startswith("--")]
    return ("Not here (one owner per setting): any option above under its own name (--max_steps: use --max-steps), "
            "nor what an option sets under another name: " + "; ".join(options)
            + "; nor what the project sets: " + "; ".join(project))
