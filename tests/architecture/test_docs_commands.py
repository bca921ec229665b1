"""Every command README.md and docs/*.md show is one the project takes, so the docs cannot drift from the code.

Read from the docs' code (fenced blocks, a line ending in `\\` joined to the next, and inline code spans):
- `bridgetower-mlflow <command> ...` (and `python -m bridgetower_mlflow <command>`): the command exists and every
  `--option` is one of its click options; a sweep passes options it does not have (and all after `--`) to train,
  so those must be train's.
- `mlflow run <project> -e <entry> -P key=value ...`: the entry point is in that project's MLproject (`.` or
  deploy/kubernetes) and every key is one of its parameters, or one that the command the entry point runs
  takes as `--key` (mlflow run appends an undeclared -P as `--key value`).
- `make <target>`: a target of the Makefile.

No subprocess: the CLI's click group is imported (its subcommands load neither torch nor mlflow).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import click
import pytest
import yaml

from bridgetower_mlflow.cli import main as cli_group

REPO = Path(__file__).resolve().parents[2]
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
SEPARATORS = {";", "&", "&&", "|", "||"}
FENCE = re.compile(r"^\s*(```|~~~)")
SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")


@dataclass(frozen=True)
class Shown:
    """One command as a doc shows it: where, and its words from the program on."""

    where: str
    words: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.where}: {' '.join(self.words)}"


def code_pieces(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of the code in a markdown file: each fenced line (continuations joined), each inline span."""
    lines = path.read_text().splitlines()
    fenced, pending, start = False, "", 0
    paragraph: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            yield from _spans(paragraph)
            paragraph, fenced = [], not fenced
            continue
        if fenced:
            start = start or number
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            yield start, pending + line
            pending, start = "", 0
        elif line.strip():
            paragraph.append((number, line))
        else:
            yield from _spans(paragraph)
            paragraph = []
    yield from _spans(paragraph)


def _spans(paragraph: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Inline code spans of one paragraph (a span may run over a line break: it reads as a space)."""
    if not paragraph:
        return
    text = "\n".join(line for _, line in paragraph)
    for match in SPAN.finditer(text):
        yield paragraph[0][0] + text.count("\n", 0, match.start()), match.group(1).replace("\n", " ")


def words_of(text: str) -> list[str]:
    """Shell words of `text` (comments dropped); a line that is not shell (an apostrophe in prose) by whitespace."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return text.split()


def _command(words: list[str], start: int) -> tuple[str, ...]:
    """The words of the command that starts at `start`, up to a `;`, `&&` or pipe."""
    end = next((i for i in range(start, len(words)) if words[i] in SEPARATORS), len(words))
    return tuple(words[start:end])


def shown_commands() -> dict[str, list[Shown]]:
    """Every `bridgetower-mlflow`, `mlflow run` and `make` command in the docs, by kind."""
    found: dict[str, list[Shown]] = {"cli": [], "mlflow_run": [], "make": []}
    for path in DOCS:
        name = path.relative_to(REPO).as_posix()
        for line, text in code_pieces(path):
            words = words_of(text)
            for i, word in enumerate(words):
                where = f"{name}:{line}"
                nxt = words[i + 1] if i + 1 < len(words) else ""
                if word == "bridgetower-mlflow" or word.endswith("/bridgetower-mlflow") or (
                        word == "-m" and nxt == "bridgetower_mlflow"):
                    skip = 2 if word == "-m" else 1
                    if i + skip < len(words) and words[i + skip] not in SEPARATORS:
                        found["cli"].append(Shown(where, _command(words, i + skip)))
                elif (word == "mlflow" or word.endswith("/mlflow")) and nxt == "run":
                    command = _command(words, i + 2)
                    if command and not command[0].startswith("-"):  # a project to run, not a mention
                        found["mlflow_run"].append(Shown(where, command))
                elif word == "make" and (i == 0 or words[i - 1] in SEPARATORS) and nxt:
                    found["make"].append(Shown(where, (nxt,)))
    return found


SHOWN = shown_commands()


@cache
def click_command(name: str) -> click.Command | None:
    return cli_group.get_command(click.Context(cli_group), name)


@cache
def options_of(name: str) -> dict[str, click.Parameter]:
    """Every spelling of every option of command `name` (the group's own for "")."""
    command = cli_group if not name else click_command(name)
    assert command is not None
    params = command.get_params(click.Context(command))
    return {opt: param for param in params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("-")}


def takes_value(param: click.Parameter, following: str) -> bool:
    """Whether `following` is this option's value (an option whose value is optional takes none that looks like one)."""
    if isinstance(param, click.Option) and param.is_flag:
        return False
    if param.metavar == "[true|false]":  # cli_support.bool_option: `--dry-run` alone, or `--dry-run false`
        return bool(following) and not following.startswith("-")
    return True


def option_problems(command: str, words: tuple[str, ...] | list[str]) -> list[str]:
    """The options in `words` (after the command's name) that `command` does not take."""
    problems = []
    options = options_of(command)
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            if command != "sweep":
                return [*problems, f"{command} takes nothing after --"]
            return problems + option_problems("train", words[i + 1:])
        if word.startswith("-") and len(word) > 1 and not re.fullmatch(r"-[\d.]+", word):
            name, equals, _ = word.partition("=")
            param = options.get(name)
            if param is None and command == "sweep":  # any other --key value goes to every train run
                param = options_of("train").get(name)
            if param is None:
                problems.append(f"{command} has no option {name}")
            elif not equals and takes_value(param, words[i + 1] if i + 1 < len(words) else ""):
                i += 1
        i += 1
    return problems


@pytest.mark.parametrize("shown", SHOWN["cli"], ids=lambda shown: shown.label[:90])
def test_cli_command_is_real(shown: Shown) -> None:
    name, *rest = shown.words
    if name.startswith("-"):
        problems = option_problems("", shown.words)
    elif click_command(name) is None:
        problems = [f"no command {name!r} (bridgetower-mlflow has {', '.join(cli_group.list_commands(None))})"]
    else:
        problems = option_problems(name, rest)
    assert not problems, f"{shown.label}\n" + "\n".join(problems)


@cache
def mlproject(project: str) -> dict:
    path = REPO / project / "MLproject"
    assert path.is_file(), f"no MLproject in {project!r}"
    return yaml.safe_load(path.read_text())


def runs_command(entry: dict) -> str:
    """The bridgetower-mlflow command an entry point's command line runs."""
    match = re.search(r"entrypoints/(\w+)\.py|bridgetower_mlflow (\S+)", entry["command"])
    assert match, f"an entry point that runs no bridgetower-mlflow command: {entry['command'][:80]}"
    return match.group(1) or match.group(2)


def run_problems(words: tuple[str, ...]) -> list[str]:
    """What `mlflow run <project> [-e entry] [-P key=value ...]` names that the project does not have."""
    project, *rest = words
    entry_name = "main"
    keys = []
    for flag, value in zip(rest, [*rest[1:], ""], strict=True):
        if flag in ("-e", "--entry-point"):
            entry_name = value
        elif flag in ("-P", "--param-list"):
            keys.append(value.partition("=")[0])
    entries = mlproject(project)["entry_points"]
    if entry_name not in entries:
        return [f"{project}/MLproject has no entry point {entry_name!r} ({', '.join(entries)})"]
    entry = entries[entry_name]
    declared = entry.get("parameters") or {}
    command = runs_command(entry)
    return [problem for key in keys if key not in declared
            for problem in option_problems(command, [f"--{key}", "value"])]


@pytest.mark.parametrize("shown", SHOWN["mlflow_run"], ids=lambda shown: shown.label[:90])
def test_mlflow_run_is_real(shown: Shown) -> None:
    problems = run_problems(shown.words)
    assert not problems, f"{shown.label}\n" + "\n".join(problems)


@cache
def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return {name for line in re.findall(r"^([\w .-]+):(?!=)", text, re.M) for name in line.split()}


@pytest.mark.parametrize("shown", SHOWN["make"], ids=lambda shown: shown.label[:90])
def test_make_target_is_real(shown: Shown) -> None:
    assert shown.words[0] in make_targets(), f"{shown.label}: no such Makefile target"


def test_the_docs_show_each_entry_point() -> None:
    """The reader finds the commands (a reader that found none would pass every check above)."""
    cli = {shown.words[0] for shown in SHOWN["cli"]}
    entries = {shown.words[shown.words.index("-e") + 1] for shown in SHOWN["mlflow_run"] if "-e" in shown.words}
    assert {"train", "sweep", "compare", "promote", "sample-data", "upload-spill"} <= cli
    assert {"train", "sweep", "compare", "promote"} <= entries
    assert {"demo", "test"} <= {shown.words[0] for shown in SHOWN["make"]}
    assert any(shown.words[0] == "deploy/kubernetes" for shown in SHOWN["mlflow_run"])


def test_a_wrong_option_is_caught() -> None:
    """The checks fail on what does not exist, through both readers."""
    line = "bridgetower-mlflow train --learning-rate 3e-3 --no-such-option 1"
    assert option_problems("train", words_of(line)[2:]) == ["train has no option --no-such-option"]
    assert option_problems("sweep", ["--repeats", "2", "--", "--max-seq-length", "32", "--bogus", "1"]) == [
        "train has no option --bogus"]
    assert option_problems("promote", ["--dry-run", "--model-name", "m"]) == []
    assert run_problems((".", "-e", "train", "-P", "bogus_key=1")) == ["train has no option --bogus_key"]
    assert run_problems(("deploy/kubernetes", "-e", "train", "-P", "run_id=abc")) == []  # undeclared, train's
    assert run_problems((".", "-e", "nope")) and "nope" not in make_targets()


# a file of this repository a doc names by its path from the root (tests/..., benchmarks/..., the package, ...)
REPO_PATH = re.compile(r"(?<![\w/.-])((?:bridgetower_mlflow|tests|benchmarks|scripts|deploy|docs)/"
                       r"[\w./-]*\w\.(?:py|md|sh|yaml|png))")


def named_paths(text: str) -> set[str]:
    return set(REPO_PATH.findall(text))


@pytest.mark.parametrize("doc", (*DOCS, REPO / "benchmarks" / "README.md"), ids=lambda doc: doc.name)
def test_every_file_a_doc_names_exists(doc: Path) -> None:
    """A module or test moved (the tree's redesign moved many) leaves no doc pointing at where it was."""
    missing = sorted(path for path in named_paths(doc.read_text(encoding="utf-8")) if not (REPO / path).exists())
    assert missing == [], f"{doc.relative_to(REPO)} names files that are not there: {missing}"


def test_the_path_reader_finds_paths() -> None:
    text = "see tests/truth/test_truth.py, `benchmarks/bench_truth.py` and (docs/images/run-page.png); not x/tests/a.py"
    assert named_paths(text) == {"tests/truth/test_truth.py", "benchmarks/bench_truth.py", "docs/images/run-page.png"}
