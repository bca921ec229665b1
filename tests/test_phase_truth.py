"""The phase breakdown against a training whose parts take known times and time themselves (the observer:
tests/phase_truth_worker.py): the real Trainer and the project's trainer class and step-timing callback, one
process, then two ranks under torchrun (DDP over gloo) where one rank's longer forward is the other's wait
in the all-reduce.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow
WORKER = REPO / "tests" / "phase_truth_worker.py"
PARTS = ("data_wait", "forward", "backward", "optimizer")
DELAY_MS = 120.0


def _run(tmp_path, launcher, *options):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([*launcher, str(WORKER), str(tmp_path / "truth.json"), *options],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(path.read_text()) for path in sorted(tmp_path.glob("truth.rank*.json"))]


def _per_step(result, phase):
    return result["figures"][f"train_phase_{phase}_seconds_per_step"]


def _observed(result, part):
    return statistics.fmean(result["observed"][part])


def _calls(part, accumulate):
    return 1 if part == "optimizer" else accumulate  # each micro-batch waits, goes forward and backward


def _known_period(result, accumulate=1):
    """The step's known length: every step sleeps alike (the medians of the parts' own clocks)."""
    return sum(statistics.median(result["observed"][part]) * _calls(part, accumulate) for part in PARTS)


def _check_known_phases(result, period, accumulate=1):
    assert result["steps"] == 8  # 10 steps, 2 warmup
    for part in PARTS:
        expected = _observed(result, part) * _calls(part, accumulate)
        assert _per_step(result, part) == pytest.approx(expected, rel=0.10), part
    fractions = [value for key, value in result["figures"].items() if key.endswith("_fraction")]
    assert sum(fractions) == pytest.approx(1.0, abs=0.02)
    assert result["figures"]["train_step_seconds_p50"] == pytest.approx(period, rel=0.10)
    assert result["figures"]["train_step_stalls"] == 0


@pytest.mark.parametrize("accumulate", [1, 2])
def test_one_process_recovers_each_known_phase(tmp_path, accumulate):
    (result,) = _run(tmp_path, [sys.executable], "--accumulate", str(accumulate))
    _check_known_phases(result, _known_period(result, accumulate), accumulate)
    assert "train_phase_all_reduce_seconds_per_step" not in result["figures"]  # one rank: none, never a 0
    assert result["merged"] == []  # the host clock marks every boundary


def test_two_ranks_show_the_wait_for_the_slower_rank_as_all_reduce(tmp_path):
    fast, slow = _run(tmp_path, [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"],
                      "--delay-rank", "1", "--delay-ms", str(DELAY_MS))
    for result in (fast, slow):  # in step with each other: the slow rank sets the period
        _check_known_phases(result, _known_period(slow))
        assert result["all_reduce_note"] == ""  # DDP's all-reduce was timed through the comm hook
        assert _per_step(result, "all_reduce") > 0
    waited = _observed(slow, "forward") - _observed(fast, "forward")  # the slow rank's own clock: ~120 ms
    assert waited == pytest.approx(DELAY_MS / 1000, rel=0.10)
    assert _per_step(fast, "all_reduce") == pytest.approx(waited, rel=0.10)
    assert _per_step(slow, "all_reduce") < 0.1 * waited  # the slow rank waits for nobody


def test_a_lazy_mode_plan_recovers_forward_and_backward_as_one_merged_phase(tmp_path):
    """Gaudi lazy mode's plan (no marks inside the step's graph) on the same known parts."""
    (result,) = _run(tmp_path, [sys.executable], "--unmarked", "h2d_end,forward_end,grads_ready")
    merged = _per_step(result, "forward_backward")
    assert merged == pytest.approx(_observed(result, "forward") + _observed(result, "backward"), rel=0.10)
    for part in ("data_wait", "optimizer"):
        assert _per_step(result, part) == pytest.approx(_observed(result, part), rel=0.10), part
    assert result["merged"] == [["forward_backward", ["host_to_device", "forward", "backward"]]]
    assert not {f"train_phase_{part}_seconds_per_step" for part in ("host_to_device", "forward", "backward")} & set(
        result["figures"])
