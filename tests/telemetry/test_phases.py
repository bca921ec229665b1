"""The phase breakdown's parts on their own: how a step is cut at its marks (with what merges), the late
read-back of device markers (no wait inside the loop), the window's figures, the step-time spread against
numpy, the verdict and the advice, the profile window's setting, and the Gaudi lazy-mode plan."""

from __future__ import annotations

import types

import numpy
import pytest

from bridgetower_mlflow.accelerators.base import (
    BACKWARD_END,
    FORWARD_END,
    GRADS_READY,
    INPUT_END,
    INPUT_START,
    PhaseTiming,
    StepClock,
)
from bridgetower_mlflow.config import build_train_config, profile_window
from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.telemetry.steps.phase_window import LeftOut, RankPhases, leave_out, window_figures
from bridgetower_mlflow.telemetry.steps.phases import PhaseRecorder, split_step
from bridgetower_mlflow.telemetry.steps.step_spread import epoch_start_cost, step_spread
from bridgetower_mlflow.telemetry.steps.step_timing import PhaseReport
from bridgetower_mlflow.telemetry.steps.throughput import RankThroughput
from bridgetower_mlflow.train.advice import RunFacts, Verdict, advice
from bridgetower_mlflow.train.findings import bottleneck, phase_tags
from bridgetower_mlflow.train.summary import step_line

pytestmark = pytest.mark.gaudi_stack

FULL = [(INPUT_START, 0.020), (INPUT_END, 0.001), (FORWARD_END, 0.030), (BACKWARD_END, 0.050), ("step_end", 0.010)]


def test_a_step_is_cut_into_its_phases_and_the_gap_into_wait_and_other():
    phases, merges = split_step(FULL, host_wait=0.015)
    assert phases == pytest.approx({"data_wait": 0.015, "host_to_device": 0.001, "forward": 0.030,
                                    "backward": 0.050, "optimizer": 0.010, "other": 0.005})
    assert merges == []
    more_wait_than_gap, _ = split_step(FULL, host_wait=0.5)  # the device was busy while the host waited
    assert more_wait_than_gap["data_wait"] == pytest.approx(0.020) and more_wait_than_gap["other"] == 0


def test_the_last_gradient_bucket_splits_backward_from_the_exposed_all_reduce():
    marks = [*FULL[:3], (GRADS_READY, 0.045), (BACKWARD_END, 0.005), FULL[-1]]
    phases, _ = split_step(marks, host_wait=0.020)
    assert phases["backward"] == pytest.approx(0.045) and phases["all_reduce"] == pytest.approx(0.005)


def test_gradient_accumulation_adds_each_micro_batch_and_its_gap():
    micro = [(INPUT_START, 0.002), (INPUT_END, 0.001), (FORWARD_END, 0.030), (BACKWARD_END, 0.050)]
    phases, _ = split_step([*FULL[:4], *micro, FULL[-1]], host_wait=0.020)
    assert phases["forward"] == pytest.approx(0.060) and phases["backward"] == pytest.approx(0.100)
    assert phases["other"] == pytest.approx(0.002)  # the host between the micro-batches


def test_unmarked_points_merge_into_forward_backward_and_say_what_merged():
    marks = [(INPUT_START, 0.020), (BACKWARD_END, 0.081), ("step_end", 0.010)]
    phases, merges = split_step(marks, host_wait=0.020)
    assert phases == pytest.approx({"data_wait": 0.020, "forward_backward": 0.081, "optimizer": 0.010, "other": 0})
    assert merges == [("forward_backward", ("host_to_device", "forward", "backward"))]


class LateClock(StepClock):
    """A device clock whose markers complete `lag` marks after they were recorded (its own step counter)."""

    source = "late device events"

    def __init__(self, lag=4):
        self.lag, self.count, self.synchronized = lag, 0, 0

    def mark(self):
        self.count += 1
        return self.count

    def ready(self, marker):
        return marker <= self.count - self.lag

    def seconds(self, start, end):
        return (end - start) * 0.001

    def synchronize(self):
        self.synchronized += 1
        self.count += self.lag


def _drive(recorder, steps, unmarked_points=()):
    recorder.begin()
    read = []
    for step in range(1, steps + 1):
        for point in (INPUT_START, INPUT_END, FORWARD_END, BACKWARD_END):
            recorder.mark(point)
        recorder.end_step(step, 0.0, samples=4)
        read += recorder.ready_steps()
    return read


def test_device_markers_are_read_back_late_and_never_waited_for_inside_the_loop():
    clock = LateClock()
    recorder = PhaseRecorder(PhaseTiming(clock=lambda: clock))
    early = _drive(recorder, steps=6)
    assert clock.synchronized == 0 and [s.step for s in early] == [1, 2, 3, 4, 5]  # the last one not yet
    rest = recorder.finish()
    assert clock.synchronized == 1 and [s.step for s in rest] == [6]
    assert all(s.seconds == pytest.approx(0.005) and s.samples == 4 for s in early + rest)


def test_a_lazy_plan_never_marks_inside_the_graph():
    clock = LateClock(lag=0)
    recorder = PhaseRecorder(PhaseTiming(clock=lambda: clock, unmarked=frozenset({INPUT_END, FORWARD_END,
                                                                                   GRADS_READY})))
    steps = _drive(recorder, steps=3)
    assert clock.count == 1 + 3 * 3  # begin, then input start, backward end and step end per step
    assert set(steps[0].phases) == {"data_wait", "forward_backward", "optimizer", "other"}


def test_the_window_figures_sum_to_one_and_the_spread_matches_numpy():
    seconds = (0.30, 0.31, 0.29, 0.90, 0.30, 0.33, 0.28, 0.31, 0.65, 0.30)
    window = RankPhases(10, {"data_wait": 1.0, "forward": 1.5, "backward": 1.0, "other": sum(seconds) - 3.5},
                        seconds)
    figures = window_figures(window)
    assert sum(v for k, v in figures.items() if k.endswith("_fraction")) == pytest.approx(1.0)
    assert figures["train_phase_forward_seconds_per_step"] == pytest.approx(0.15)
    for share, name in ((50, "p50"), (90, "p90"), (99, "p99")):
        assert figures[f"train_step_seconds_{name}"] == pytest.approx(numpy.percentile(seconds, share))
    assert figures["train_step_seconds_max"] == 0.90
    assert figures["train_step_seconds_cv"] == pytest.approx(numpy.std(seconds) / numpy.mean(seconds))
    assert figures["train_step_stalls"] == 2  # 0.90 and 0.65 > 2 x 0.305
    assert step_spread(()) == {} and window_figures(RankPhases()) == {}


def test_profiled_steps_leave_the_throughput_window():
    window = RankThroughput(steps=10, samples=80, seconds=5.0, wait_seconds=0.5, total_seconds=7.0,
                            total_wait_seconds=0.6)
    left = leave_out(window, LeftOut(steps=2, samples=16, seconds=2.0, wait_seconds=0.1))
    assert (left.steps, left.samples, left.seconds, left.wait_seconds) == (8, 64, 3.0, pytest.approx(0.4))
    assert leave_out(window, LeftOut()) is window


def _fractions(**shares):
    return {f"train_phase_{phase}_fraction": share for phase, share in shares.items()}


@pytest.mark.parametrize("shares, expected", [
    (dict(data_wait=0.31, forward=0.3, backward=0.3, optimizer=0.05, other=0.04), ("input", "data_wait")),
    (dict(data_wait=0.05, forward=0.3, backward=0.3, optimizer=0.1, other=0.25), ("host", "other")),
    (dict(data_wait=0.21, forward=0.2, backward=0.2, all_reduce=0.35, other=0.04), ("communication", "all_reduce")),
    (dict(data_wait=0.02, forward_backward=0.8, optimizer=0.1, other=0.08), ("compute", "the device's phases")),
])
def test_the_verdict_is_the_largest_waiting_phase_at_or_above_a_fifth(shares, expected):
    verdict = bottleneck(_fractions(**shares))
    assert (verdict.name, verdict.phase) == expected
    assert bottleneck({}) is None


@pytest.mark.parametrize("facts, expected", [
    (RunFacts(0.02, 2, 50.0, 16, None, False, Verdict("host", "other", 0.31), batch_size=8, hpu_graphs_possible=True),
     "host-bound (the host's own work between the phases holds 31% of the step): try use_hpu_graphs_for_training"),
    (RunFacts(0.02, 2, 50.0, 16, None, False, Verdict("host", "other", 0.31), batch_size=8),
     "try a larger per_device_train_batch_size (now 8)"),
    (RunFacts(0.02, 2, 50.0, 16, None, False, Verdict("communication", "all_reduce", 0.4), fast_ddp_possible=True),
     "communication-bound (the exposed all-reduce holds 40% of the step): try distribution_strategy=fast_ddp"),
    (RunFacts(0.03, 1, 90.0, 16, None, True, Verdict("input", "data_wait", 0.25)),
     "input-bound (the device waits for data 25% of the step, workers at 90 % CPU): try dataloader_num_workers=2"),
    (RunFacts(0.01, 2, 50.0, 16, None, True, Verdict("compute", "the device's phases", 0.97), mfu_achievable=0.42),
     "compute-bound (wait 1%): more workers will not help; the device's phases hold 97% of the step, at 42% of the "
     "device's measured matmul rate"),
    (RunFacts(0.02, 1, 60.0, 2, None, False, Verdict("compute", "the device's phases", 0.95), workers_restart=True,
              epoch_start_extra_seconds=0.9, epoch_start_fraction=0.32),
     "the loader starts its 1 worker(s) again at every epoch: an epoch's first step takes 0.90 s more than the "
     "others' median (32% of the window): try hf_args='--dataloader_persistent_workers true'"),
    (RunFacts(0.02, 1, 60.0, 2, None, False, Verdict("compute", "the device's phases", 0.95), workers_restart=True,
              epoch_start_extra_seconds=0.2, epoch_start_fraction=0.09),
     "compute-bound (wait 2%)"),  # under a tenth of the window: not worth the line
    (RunFacts(0.02, 1, 60.0, 2, None, False, Verdict("compute", "the device's phases", 0.95), workers_restart=False,
              epoch_start_extra_seconds=0.9, epoch_start_fraction=0.32),
     "compute-bound (wait 2%)"),  # persistent workers (or none): the epoch's cost is not theirs to save
])
def test_the_advice_names_the_lever_and_its_figure(facts, expected):
    assert expected in advice(facts)


def test_the_step_line_says_what_an_epochs_first_step_cost_once_it_is_a_tenth_of_the_window():
    metrics = {"train_phase_forward_fraction": 0.7, "train_phase_backward_fraction": 0.3,
               "train_step_seconds_p50": 0.212, "train_step_seconds_p90": 1.11,
               "train_epoch_start_extra_seconds": 0.9, "train_epoch_start_extra_fraction": 0.32}
    assert step_line(metrics) == ("where a step went: forward 70%, backward 30% (step p50 0.212 s, p90 1.11 s; "
                                  "an epoch's first step +0.90 s, 32% of the window)")
    assert step_line({**metrics, "train_epoch_start_extra_fraction": 0.09}).endswith("(step p50 0.212 s, p90 1.11 s)")


def test_the_epoch_start_cost_is_beyond_the_other_steps_median_and_absent_without_both_kinds():
    seconds, firsts = (0.2, 1.1, 0.2, 0.3, 0.2, 1.0), (False, True, False, False, False, True)
    figures = epoch_start_cost(seconds, firsts)
    assert figures["train_epoch_start_steps"] == 2
    assert figures["train_epoch_start_extra_seconds"] == pytest.approx(((1.1 - 0.2) + (1.0 - 0.2)) / 2)
    assert figures["train_epoch_start_extra_fraction"] == pytest.approx(1.7 / sum(seconds))
    assert epoch_start_cost(seconds, (False,) * 6) == {} and epoch_start_cost((1.0,), (True,)) == {}
    assert window_figures(RankPhases(6, {"forward": sum(seconds)}, seconds, epoch_starts=firsts))[
        "train_epoch_start_steps"] == 2


def test_the_phase_tags_say_what_merged_and_what_is_absent():
    timing = PhaseTiming(source="device events (test)", merged_why="one graph",
                         all_reduce="inside forward_backward (lazy)")
    report = PhaseReport(timing, (("forward_backward", ("host_to_device", "forward", "backward")),))
    metrics = _fractions(data_wait=0.1, forward_backward=0.8, optimizer=0.05, other=0.05)
    tags = phase_tags(report, metrics, world_size=8)
    assert tags["phases.clock"] == "device events (test)"
    assert tags["phases.merged"] == "forward_backward = host_to_device + forward + backward: one graph"
    assert tags["phases.note"] == ("host_to_device: inside forward_backward; forward: inside forward_backward; "
                                   "backward: inside forward_backward; all_reduce: inside forward_backward (lazy)")
    single = phase_tags(PhaseReport(PhaseTiming()), _fractions(data_wait=0.1, host_to_device=0.1, forward=0.3,
                                                              backward=0.4, optimizer=0.05, other=0.05), 1)
    assert single["phases.note"] == "all_reduce: one device, no gradient all-reduce"
    assert single["phases.merged"].startswith("nothing merged")
    assert "no measured step" in phase_tags(PhaseReport(PhaseTiming()), {}, 1)["phases.note"]
    assert phase_tags(PhaseReport(None, error="boom"), {}, 1) == {"phases.note": "no phase breakdown: boom"}


@pytest.mark.parametrize("text, window", [("", None), ("5-6", (5, 6)), (" 7 - 7 ", (7, 7))])
def test_the_profile_window_is_two_steps(text, window):
    assert profile_window(build_train_config(profile_steps=text, max_steps=10)) == window


@pytest.mark.parametrize("raw, said", [
    (dict(profile_steps="5-2"), "profile_steps: invalid value '5-2'; allowed: A-B"),
    (dict(profile_steps="x"), "profile_steps: invalid value 'x'; allowed: A-B"),
    (dict(profile_steps="0-2"), "allowed: A-B, the first and last global step to profile (1 <= A <= B)"),
    (dict(profile_steps="3-4", max_steps=10), "allowed: steps after the 3 warmup steps"),
    (dict(profile_steps="8-12", max_steps=10), "allowed: steps within max_steps (10)"),
    (dict(profile_steps="4-10", max_steps=10), "allowed: a window that leaves at least one measured step"),
])
def test_a_bad_profile_window_names_the_field(raw, said):
    with pytest.raises(ConfigError) as refused:
        build_train_config(**raw)
    assert said in str(refused.value)


class RecordingEvent:
    """habana_frameworks.torch.hpu.Event's surface (events.py: record, query, elapsed_time in ms)."""

    made: list = []

    def __init__(self, enable_timing=False):
        self.enable_timing, self.recorded = enable_timing, 0
        RecordingEvent.made.append(self)

    def record(self, stream=None):
        self.recorded += 1

    def query(self):
        return True

    def elapsed_time(self, other):
        return 2.5


def test_the_gaudi_lazy_plan_merges_and_eager_does_not(monkeypatch):
    """The adapter's plan on an HPU, the bridge's hpu module replaced by a recording stand-in."""
    import sys

    import torch

    from bridgetower_mlflow.accelerators.gaudi.adapter import GaudiAccelerator

    hpu = types.SimpleNamespace(Event=RecordingEvent, synchronize=lambda: None)
    bridge = types.SimpleNamespace(torch=types.SimpleNamespace(hpu=hpu))
    for name, module in (("habana_frameworks", bridge), ("habana_frameworks.torch", bridge.torch),
                         ("habana_frameworks.torch.hpu", hpu)):
        monkeypatch.setitem(sys.modules, name, module)
    args = types.SimpleNamespace(device=torch.device("hpu"), use_lazy_mode=True, distribution_strategy="ddp")
    lazy = GaudiAccelerator("gaudi2").phase_timing(types.SimpleNamespace(tags={"gaudi.execution_mode": "lazy"}), args)
    assert lazy.unmarked == {INPUT_END, FORWARD_END, GRADS_READY} and "one graph" in lazy.merged_why
    assert "inside forward_backward" in lazy.all_reduce and lazy.source.startswith("device events (habana")
    clock = lazy.clock()
    start, end = clock.mark(), clock.mark()
    assert [(e.enable_timing, e.recorded) for e in RecordingEvent.made] == [(True, 1), (True, 1)]
    assert clock.ready(end) and clock.seconds(start, end) == 0.0025  # milliseconds -> seconds
    eager = GaudiAccelerator("gaudi2").phase_timing(types.SimpleNamespace(tags={"gaudi.execution_mode": "eager"}),
                                                    args)
    assert eager.unmarked == frozenset() and "inside backward" in eager.all_reduce
    fast = GaudiAccelerator("gaudi2").phase_timing(types.SimpleNamespace(tags={"gaudi.execution_mode": "lazy"}),
                                                   types.SimpleNamespace(**{**vars(args), "distribution_strategy":
                                                                            "fast_ddp"}))
    assert "inside optimizer" in fast.all_reduce
    cpu_mode = GaudiAccelerator("gaudi2").phase_timing(None, types.SimpleNamespace(device=torch.device("cpu")))
    assert cpu_mode.source.startswith("host clock")
    assert BACKWARD_END not in lazy.unmarked


def test_findings_tag_the_verdict_and_leave_joules_per_sample_out_of_a_profiled_run(monkeypatch):
    from bridgetower_mlflow.train.findings import findings
    from bridgetower_mlflow.train.observe import Observed

    monkeypatch.setattr("bridgetower_mlflow.telemetry.flops.flops_per_sample", lambda *a: 1e9)
    prepared = types.SimpleNamespace(
        loaded=types.SimpleNamespace(model=types.SimpleNamespace(config=None), image=types.SimpleNamespace(size=64)),
        recipe=types.SimpleNamespace(precision="fp32"),
        args=types.SimpleNamespace(tf32=False, dataloader_persistent_workers=False),
        device=types.SimpleNamespace(kind="cpu", device_name="AMD EPYC", count=1), device_loader=None,
        adapter=types.SimpleNamespace(device_decode_loader_name=None, distribution_strategies=("ddp",)))
    metrics = {"train_samples_per_second": 100.0, "train_steady_state_seconds": 10.0, "dataloader_wait_fraction": 0.3,
               "device_achievable_tflops": 0.5,
               **_fractions(data_wait=0.3, host_to_device=0.01, forward=0.3, backward=0.3, optimizer=0.05, other=0.04)}
    observed = Observed(energy_joules=500.0, energy_note="", phases=PhaseReport(PhaseTiming()))
    for profile, per_sample in (("", 0.5), ("5-6", None)):
        config = build_train_config(profile_steps=profile, max_steps=10)
        found, tags = findings(config, prepared, metrics, observed)
        assert tags["bottleneck"] == "input" and tags["advice"].startswith("input-bound (wait 30%")
        assert found["train_mfu_achievable"] == pytest.approx(100 * 1e9 / 1e12 / 0.5)
        assert found["train_energy_joules"] == 500.0 and found.get("train_joules_per_sample") == per_sample
        assert ("energy.note" in tags) == bool(profile)
