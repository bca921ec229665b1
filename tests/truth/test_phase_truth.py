"""The phase breakdown against a training whose parts take known times and time themselves (the observer:
tests/truth/phase_truth_worker.py): the real Trainer and the project's trainer class and step-timing callback, one
process, then two ranks under torchrun (DDP over gloo) where one rank's longer forward is the other's wait
in the all-reduce.

Each phase is checked between two bounds the observer saw on its own clock, step by step: at least its own
sleeps, at most the span from the sleep before it to the sleep after it (or the step's end). The Trainer's own
work around each sleep (a few ms a step, more on a slow or busy host) lies between the bounds, so the check
holds on any host, yet a second of one part counted in another's phase breaks one bound or the other.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.truth.phase_truth_worker import WARMUP  # the window leaves out the first steps

pytestmark = pytest.mark.slow
WORKER = REPO / "tests" / "truth" / "phase_truth_worker.py"
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


def _measured_steps(result):
    """The window's steps as the observer saw them: (previous step's end, this step's end, the sleeps between)."""
    ends, spans = [float("-inf"), *result["step_ends"]], [tuple(span) for span in result["spans"]]
    steps = [(ends[k], ends[k + 1], [s for s in spans if ends[k] < s[1] <= ends[k + 1]])
             for k in range(len(ends) - 1)]
    return steps[WARMUP:]


def _bounds(result, parts):
    """Per step, on the observer's clock: the sleeps of `parts` (the phase took at least these), and the span from
    the sleep before each run of them to the sleep after it, or the step's ends (it took at most this)."""
    least, most = [], []
    for step_start, step_end, spans in _measured_steps(result):
        low = high = 0.0
        for i, (part, started, ended) in enumerate(spans):
            if part not in parts:
                continue
            low += ended - started
            if i == 0 or spans[i - 1][0] not in parts:  # a run of the phase's sleeps begins
                before = spans[i - 1][2] if i else step_start
                last = next((j for j in range(i, len(spans)) if spans[j][0] not in parts), len(spans)) - 1
                high += (spans[last + 1][1] if last + 1 < len(spans) else step_end) - before
        least.append(low)
        most.append(high)
    return statistics.fmean(least), statistics.fmean(most)


def _backward_ends(result):
    """Where each measured step's last backward sleep ended (the rank's bucket is launched just after)."""
    return [max(end for part, _, end in spans if part == "backward") for _, _, spans in _measured_steps(result)]


def _check_between(result, phase, parts=None):
    least, most = _bounds(result, set(parts or [phase]))
    reported = _per_step(result, phase)
    assert least - 0.001 <= reported <= most + 0.001, (
        f"{phase}: {reported * 1000:.1f} ms a step, the observer saw at least {least * 1000:.1f} ms (its sleeps) "
        f"and at most {most * 1000:.1f} ms (from the sleep before to the sleep after)")


def _check_known_phases(result):
    assert result["steps"] == 8  # 10 steps, 2 warmup
    for part in PARTS:
        _check_between(result, part)
    fractions = [value for key, value in result["figures"].items() if key.endswith("_fraction")]
    assert sum(fractions) == pytest.approx(1.0, abs=0.02)
    seen = [end - start for start, end, _ in _measured_steps(result)]  # the observer's own step ends
    assert result["figures"]["train_step_seconds_p50"] == pytest.approx(statistics.median(seen), rel=0.02, abs=0.002)
    assert result["figures"]["train_step_stalls"] == 0


@pytest.mark.parametrize("accumulate", [1, 2])
def test_one_process_recovers_each_known_phase(tmp_path, accumulate):
    (result,) = _run(tmp_path, [sys.executable], "--accumulate", str(accumulate))
    _check_known_phases(result)
    assert "train_phase_all_reduce_seconds_per_step" not in result["figures"]  # one rank: none, never a 0
    assert result["merged"] == []  # the host clock marks every boundary


def test_two_ranks_show_the_wait_for_the_slower_rank_as_all_reduce(tmp_path):
    fast, slow = _run(tmp_path, [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"],
                      "--delay-rank", "1", "--delay-ms", str(DELAY_MS))
    for result in (fast, slow):
        _check_known_phases(result)
        assert result["all_reduce_note"] == ""  # DDP's all-reduce was timed through the comm hook
        assert _per_step(result, "all_reduce") > 0
    p50 = {rank: result["figures"]["train_step_seconds_p50"] for rank, result in (("fast", fast), ("slow", slow))}
    assert p50["fast"] == pytest.approx(p50["slow"], rel=0.05), p50  # in step: the slow rank sets the period
    waited = _observed(slow, "forward") - _observed(fast, "forward")  # the slow rank's own clock: ~120 ms
    assert waited == pytest.approx(DELAY_MS / 1000, rel=0.10)
    # how much later the slow rank reached the all-reduce, step by step, on the host's one monotonic clock (the
    # ranks' other work differs too on a busy host: 136 ms against 120 ms of extra sleep in one CI)
    lag = statistics.fmean(late - early for early, late in zip(_backward_ends(fast), _backward_ends(slow)))
    assert _per_step(fast, "all_reduce") == pytest.approx(lag, rel=0.10), f"slow rank {lag * 1000:.1f} ms later"
    assert _per_step(slow, "all_reduce") < 0.1 * waited  # the slow rank waits for nobody


def test_a_lazy_mode_plan_recovers_forward_and_backward_as_one_merged_phase(tmp_path):
    """Gaudi lazy mode's plan (no marks inside the step's graph) on the same known parts."""
    (result,) = _run(tmp_path, [sys.executable], "--unmarked", "h2d_end,forward_end,grads_ready")
    _check_between(result, "forward_backward", ("forward", "backward"))
    for part in ("data_wait", "optimizer"):
        _check_between(result, part)
    assert result["merged"] == [["forward_backward", ["host_to_device", "forward", "backward"]]]
    assert not {f"train_phase_{part}_seconds_per_step" for part in ("host_to_device", "forward", "backward")} & set(
        result["figures"])
