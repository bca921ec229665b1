"""scripts/device-check.sh --rehearse: the one-shot GPU check, run here as it runs on the lent machine.

A stand-in for the device's python3 (this machine's CPU torch and the packages the device has, kept between
rehearsals) and the carried wheels, installed fresh with no index; accel=cpu, the tiny preset and batch 8 instead
of cuda, large and 48. It keeps the script working between the rare sessions that have a GPU.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import REPO, no_running_runs

pytestmark = pytest.mark.slow


def test_the_rehearsal_prints_the_full_table_within_the_file_limit(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"), "BUDGET_S": "900",
           "RUN_S": "150"}
    done = subprocess.run([str(REPO / "scripts" / "device-check.sh"), "--rehearse"], capture_output=True, text=True,
                          timeout=1500, env=env, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    table = (tmp_path / "out" / "results.txt").read_text().splitlines()
    assert len(table) == 7 and table[0].split()[:3] == ["workers", "device_decode", "data_loader"]
    cells = [line.split() for line in table[1:]]
    assert [(c[0], c[1]) for c in cells] == [(w, d) for w in "012" for d in ("false", "true")]  # interleaved
    assert all("FINISHED" in line for line in table[1:]), "\n".join(table)
    assert {c[3] for c in cells} == {"cpu", "cpu-fallback"}  # decode on the CPU said so, not faked
    assert all(float(c[4]) > 0 for c in cells)
    header = table[0].split()
    assert header[11:17] == ["bottleneck", "phases_pct", "step_p50_s", "step_p90_s", "achievable_tflops",
                             "mfu_achievable"]
    for c in cells:  # where each run's step went, and the device's matmul rate
        assert c[11] in ("input", "host", "communication", "compute")
        shares = dict((part.rstrip("0123456789"), int(part[len(part.rstrip("0123456789")):]))
                      for part in c[12].split("/"))
        assert set(shares) == {"wait", "h2d", "fwd", "bwd", "opt", "oth"} and 97 <= sum(shares.values()) <= 103
        # mfu_achievable (c[16]) needs the model's FLOPs, which the rehearsal's transformers 5.17 cannot count on
        # the meta device (mfu.note says so); the device's matmul rate is measured regardless
        assert 0 < float(c[13]) <= float(c[14]) and float(c[15]) > 0
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(files) <= 8 and "results.tsv" in files and "device-check.log" in files
    assert "dataloader_wait_fraction" in done.stdout and "nvjpeg_vs_cpu: skipped (no CUDA device)" in done.stdout
    assert no_running_runs(f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}") == []


@pytest.mark.parametrize("metrics, cell", [
    ({"train_phase_data_wait_fraction": 0.031, "train_phase_forward_backward_fraction": 0.80,
      "train_phase_optimizer_fraction": 0.12, "train_phase_other_fraction": 0.049}, "wait3/fb80/opt12/oth5"),
    ({}, "-"),
])
def test_the_phases_cell_is_one_word_in_the_phases_order(metrics, cell):
    import sys

    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from device_check import COLUMNS, phases_cell
    finally:
        sys.path.remove(str(REPO / "scripts"))
    assert phases_cell(metrics) == cell
    skipped = subprocess.run([sys.executable, str(REPO / "scripts" / "device_check.py"), "skipped", "2", "true"],
                             capture_output=True, text=True, check=True).stdout.rstrip("\n").split("\t")
    header = subprocess.run([sys.executable, str(REPO / "scripts" / "device_check.py"), "header"],
                            capture_output=True, text=True, check=True).stdout.rstrip("\n").split("\t")
    assert header == list(COLUMNS) and len(skipped) == len(COLUMNS) and skipped[-1] == "skipped (time budget)"
