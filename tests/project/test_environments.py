"""The environments users get: `mlflow run` without --env-manager (conda.yaml), `pip install '.[cuda]'` beside
an installed torch, and a Gaudi box whose environment cannot hold Habana's PyTorch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from packaging.requirements import Requirement

from tests.conftest import REPO, no_running_runs, run_cli

pytestmark = pytest.mark.gaudi_stack

tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_conda_env_is_the_base_dependencies_plus_the_cuda_extra():
    """What MLflow builds for `mlflow run . -e train -P accel=h100` (no --env-manager) has NVML and torchvision."""
    conda = yaml.safe_load((REPO / "conda.yaml").read_text())
    pip = next(d["pip"] for d in conda["dependencies"] if isinstance(d, dict))
    project = _pyproject()
    wanted = project["dependencies"] + project["optional-dependencies"]["cuda"]
    assert sorted(map(str, map(Requirement, pip))) == sorted(map(str, map(Requirement, wanted)))


@pytest.mark.slow
def test_the_cuda_extra_keeps_the_installed_torch():
    """Each torchvision pins one torch: pip must pick the one of the torch already here, not replace it."""
    import torch

    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
                           *_pyproject()["optional-dependencies"]["cuda"]], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    chosen = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(done.stdout)["install"]}
    assert "torch" not in chosen, chosen
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    if "torchvision" in chosen:  # torch 2.x <-> torchvision 0.(x+15): the pairs README names
        assert major == "2" and chosen["torchvision"].startswith(f"0.{int(minor) + 15}."), chosen


def test_gaudi_hardware_without_habanas_pytorch_says_which_env_manager(tmp_path, sqlite_uri, cache_dir):
    """conda.yaml can never hold Habana's PyTorch: on a Gaudi box the error says so and gives the command."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for node in ("accel0", "accel_controlD0", "hl0"):
        (dev / node).write_text("")
    done = run_cli(["train", "--accel", "gaudi2", "--max-steps", "2"], env_extra={"BRIDGETOWER_DEV_DIR": str(dev)},
                   timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len([line for line in lines if line.startswith("error:")]) == 1, done.stderr
    assert lines[-1].startswith("error: accel: gaudi2 requested and Gaudi hardware is here (")
    assert "cannot hold Habana's PyTorch" in lines[-1] and "--env-manager local" in lines[-1]
    assert no_running_runs(sqlite_uri) == []
    plain = run_cli(["train", "--accel", "gaudi2", "--max-steps", "2"],
                    env_extra={"BRIDGETOWER_DEV_DIR": str(tmp_path)}, timeout=300)
    assert plain.returncode == 2 and "no Gaudi device is present" in plain.stderr.strip().splitlines()[-1]
