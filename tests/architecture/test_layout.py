"""The tree keeps its shape: every module imports on its own, small modules, narrow functions, one schema."""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from bridgetower_mlflow.config import SCHEMA, build_train_config

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "bridgetower_mlflow"
MODULES = sorted(".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
                 for p in PACKAGE.rglob("*.py"))
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _import_alone(module: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                          timeout=180, cwd=REPO)
    return module, (done.stderr.strip().splitlines() or [""])[-1] if done.returncode else ""


def test_every_module_imports_in_a_fresh_interpreter():
    """A cycle shows up as a partially initialized module when its members are imported first."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = {module: error for module, error in pool.map(_import_alone, MODULES) if error}
    assert failures == {}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_is_small_and_its_functions_narrow(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 400, f"{len(lines)} lines"  # a module holds one job: its size follows the job
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
            names = [n for n in names if n not in ("self", "cls")]
            assert len(names) <= 6, f"{node.name} takes {len(names)} parameters"
            assert node.end_lineno - node.lineno < 60, f"{node.name} is {node.end_lineno - node.lineno} lines"


def test_mlproject_train_parameters_are_the_schema():
    project = yaml.safe_load((REPO / "MLproject").read_text())
    entry = project["entry_points"]["train"]
    assert project["entry_points"]["main"] is entry  # one block, reused through a YAML anchor
    fields = [spec for spec in SCHEMA if spec.metadata["project"]]
    assert list(entry["parameters"]) == [spec.name for spec in fields]
    declared = {name: spec["default"] for name, spec in entry["parameters"].items()}
    assert build_train_config(**declared) == build_train_config()  # the same defaults, once parsed
    for spec in fields:
        assert f"--{spec.name.replace('_', '-')} {{{spec.name}}}" in entry["command"]


def test_help_and_argument_errors_import_nothing_heavy():
    probe = ("import sys\nfrom bridgetower_mlflow.cli import main\n"
             "for argv in (['--help'], ['train', '--help'], ['sweep', '--help'], ['compare', '--help'],"
             " ['promote', '--help'], ['train', '--accel', 'tpu'], ['train', '--hf-args', '--max_steps 5']):\n"
             "    try:\n        main(argv, standalone_mode=False)\n    except BaseException:\n        pass\n"
             "print(sorted(m for m in ('torch', 'transformers', 'mlflow', 'datasets') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr[-2000:]


def test_only_launch_ranks_reads_the_launcher_variables():
    """RANK alone is wrong under mpirun (OMPI_COMM_WORLD_RANK) and Intel MPI (PMI_RANK): one reader knows them all."""
    from bridgetower_mlflow.launch.ranks import LOCAL_RANK_KEYS, LOCAL_WORLD_KEYS, RANK_KEYS

    keys = set(RANK_KEYS + LOCAL_RANK_KEYS + LOCAL_WORLD_KEYS) | {"WORLD_SIZE"}
    readers = {str(path.relative_to(PACKAGE)) for path in SOURCES for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Constant) and node.value in keys}
    assert readers == {"launch/ranks.py"}


# the one module that reads the process environment, and the one that reads the launchers' variables
ENVIRONMENT_READERS = {"environment.py", "launch/ranks.py"}


def environment_reads(path: Path) -> list[str]:
    """Where a module reads environment variables: os.environ, os.getenv, a name `environ` (`from os import
    environ`, a mapping named so) or another process's /proc/<pid>/environ."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" \
                and node.attr in ("environ", "environb", "getenv", "getenvb"):
            found.append(f"{node.lineno}: os.{node.attr}")
        elif isinstance(node, (ast.Name, ast.arg)) and getattr(node, "id", getattr(node, "arg", "")) == "environ":
            found.append(f"{node.lineno}: environ")
        elif isinstance(node, ast.ImportFrom) and node.module == "os" \
                and {alias.name for alias in node.names} & {"environ", "getenv"}:
            found.append(f"{node.lineno}: from os import")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith("/environ"):
            found.append(f"{node.lineno}: {node.value}")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def test_only_the_environment_module_reads_the_environment():
    """Every variable the project reads is read in environment.py (launch/ranks.py keeps the launchers' own)."""
    readers = {str(path.relative_to(PACKAGE)): environment_reads(path) for path in SOURCES}
    outside = {where: lines for where, lines in readers.items() if lines and where not in ENVIRONMENT_READERS}
    assert outside == {}
    assert all(readers[where] for where in ENVIRONMENT_READERS)


def test_the_environment_scan_finds_each_way_of_reading(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("import os\nfrom os import environ\n"
                      "a = os.environ.get('X')\nb = os.getenv('Y')\nc = environ['Z']\n"
                      "def f(environ):\n    return environ.get('W')\n"
                      "d = open(f'/proc/{os.getppid()}/environ')\ne = os.getpid()\n")
    assert [line.split(": ")[0] for line in environment_reads(module)] == ["2", "3", "4", "5", "6", "7", "8"]


def test_one_secret_vocabulary():
    """Params, tags, messages and hf_args flags are judged by redact.py's words, spelled nowhere else."""
    spelled = {str(path.relative_to(PACKAGE)) for path in SOURCES for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Constant) and isinstance(node.value, str)
               and "passw" in node.value.lower() and "|" in node.value}  # a pattern, not a message
    assert spelled == {"redact.py"}


# Contract values that are also ordinary words of another meaning, so their spelling elsewhere is not a
# second spelling of the contract: run kinds are also command and split names, and these tag names are also
# TrainConfig fields or plain words.
CONTRACT_WORDS = {"train", "sweep", "compare", "device", "dataset", "precision", "error", "target"}
# The families are also torch's device types and the vendors' own names: spelled only in the hardware layer.
HARDWARE_WORDS = {"cuda", "gaudi"}


def test_contract_values_are_spelled_only_in_the_contract():
    """A writer and its readers import one constant, so a rename cannot split them."""
    import bridgetower_mlflow.contract as contract

    values = {v for k, v in vars(contract).items() if k.isupper() and isinstance(v, str) and len(v) >= 4}
    spelled = sorted({f"{path.relative_to(PACKAGE)}: {node.value!r}" for path in SOURCES if path.name != "contract.py"
                      for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, ast.Constant) and node.value in values - CONTRACT_WORDS
                      and not (node.value in HARDWARE_WORDS and path.is_relative_to(PACKAGE / "accelerators"))})
    assert spelled == []
