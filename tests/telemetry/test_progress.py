"""Training progress on stderr (step/total, the project's samples/s, loader wait, ETA) and one samples/s figure
on the console: the progress line's, never the Trainer's own."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import pytest

from bridgetower_mlflow.errors import ConfigError

from tests.conftest import run_cli

PROGRESS = re.compile(r"^train: step (\d+)/(\d+) \((\d+) %\), (?:([\d.]+) samples/s|warming up), "
                      r"loader wait (\d+) %, (?:ETA|done in) (\w+|\?)$")
TINY = ["--max-steps", "3", "--logging-steps", "2", "--throughput-warmup-steps", "1",
        "--per-device-train-batch-size", "4", "--max-train-samples", "16", "--max-eval-samples", "4",
        "--max-seq-length", "16", "--dataloader-num-workers", "0", "--log-model", "false"]


def test_a_real_train_shows_its_progress_and_one_samples_per_second_figure(cache_dir, sqlite_uri):
    done = run_cli(["train", *TINY], env_extra={"BRIDGETOWER_PROGRESS_SECONDS": "0"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [PROGRESS.match(line) for line in done.stderr.splitlines() if line.startswith("train: ")]
    assert lines and all(lines), done.stderr[-3000:]
    assert [(int(m[1]), int(m[2])) for m in lines] == [(1, 3), (2, 3), (3, 3)]  # interval 0: every step
    assert lines[0][4] is None and lines[0][0].endswith("ETA ?")  # step 1 is the warmup
    assert lines[1][4] is not None and " ETA " in lines[1][0]  # step 2 is measured: a rate and what is left
    assert " done in " in lines[-1][0]  # the last line comes at the end
    console = done.stdout + done.stderr
    assert "samples_per_second" not in console, console[-3000:]  # no Trainer figure (train_ or eval_)
    figures = [line for line in console.splitlines() if "samples/s" in line]
    summary = [line for line in figures if not line.startswith("train: step")]
    assert len(summary) == 1 and summary[0].startswith("run "), figures
    assert f"{lines[-1][4]} samples/s" in summary[0]  # the last progress figure is the run's headline


def test_the_line_says_step_rate_wait_and_eta():
    from bridgetower_mlflow.telemetry.steps.progress import progress_line

    assert (progress_line(120, 500, 431.24, 0.031, 134) ==
            "train: step 120/500 (24 %), 431.2 samples/s, loader wait 3 %, ETA 2m14s")
    assert progress_line(1, 500, None, 0.5, None) == "train: step 1/500 (0 %), warming up, loader wait 50 %, ETA ?"
    assert (progress_line(500, 500, 12.0, 0.0, 3725, done=True) ==
            "train: step 500/500 (100 %), 12.0 samples/s, loader wait 0 %, done in 1h02m")


@pytest.mark.parametrize("value, seconds", [(None, 10.0), ("", 10.0), ("0", 0.0), ("2.5", 2.5)])
def test_the_interval_comes_from_the_environment(value, seconds):
    from bridgetower_mlflow.environment import progress_seconds

    assert progress_seconds({} if value is None else {"BRIDGETOWER_PROGRESS_SECONDS": value}) == seconds


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_bad_interval_is_one_line_naming_the_variable(value):
    from bridgetower_mlflow.environment import progress_seconds

    expected = r"^BRIDGETOWER_PROGRESS_SECONDS: invalid value .*; allowed: seconds, a number >= 0$"
    with pytest.raises(ConfigError, match=expected):
        progress_seconds({"BRIDGETOWER_PROGRESS_SECONDS": value})


class StepClock:
    """time.perf_counter for the callbacks: each step lasts exactly `step_seconds` (no machine load in it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _drive(capsys, steps: int, interval: float, zero: bool = True, step_seconds: float = 0.0, monkeypatch=None):
    """Throughput and progress callbacks as the Trainer calls them; returns the progress lines printed."""
    from bridgetower_mlflow.telemetry.steps.progress import ProgressPrinter
    from bridgetower_mlflow.telemetry.steps.throughput import ThroughputCallback

    clock = StepClock()
    if monkeypatch is not None:
        monkeypatch.setattr(time, "perf_counter", clock)

    throughput = ThroughputCallback(SimpleNamespace(log_metric=lambda *a: None), None, samples_per_step=8,
                                    warmup_steps=1, logging_steps=100)
    progress = ProgressPrinter(throughput, interval)
    state = SimpleNamespace(global_step=0, max_steps=steps, is_world_process_zero=zero)
    for callback in (throughput, progress):
        callback.on_train_begin(None, state, None)
    for step in range(1, steps + 1):
        clock.now += step_seconds
        state.global_step = step
        for callback in (throughput, progress):
            callback.on_step_end(None, state, None)
    for callback in (throughput, progress):
        callback.on_train_end(None, state, None)
    return capsys.readouterr().err.splitlines()


def test_lines_come_at_most_once_an_interval_first_step_and_end_included(capsys):
    lines = _drive(capsys, steps=6, interval=3600)
    assert [line.split(" (")[0] for line in lines] == ["train: step 1/6", "train: step 6/6"]


def test_the_rate_is_the_throughput_rule_and_the_eta_follows_it(capsys, monkeypatch):
    lines = _drive(capsys, steps=3, interval=0, step_seconds=0.05, monkeypatch=monkeypatch)
    assert "warming up" in lines[0] and "ETA ?" in lines[0]
    rate = float(re.search(r"([\d.]+) samples/s", lines[1])[1])
    assert rate == pytest.approx(8 / 0.05, rel=0.01), lines[1]  # one measured step of 0.05 s carrying 8 samples
    assert re.search(r"ETA 0s$", lines[1]), lines[1]  # one step left at 0.05 s


def test_only_the_main_process_prints(capsys):
    assert _drive(capsys, steps=3, interval=0, zero=False) == []


def test_the_console_drops_only_the_trainers_speed_figures(capsys):
    from transformers import PrinterCallback

    from bridgetower_mlflow.telemetry.steps.progress import without_speed_figures

    logs = {"train_runtime": 4.0, "train_samples_per_second": 9.0, "train_steps_per_second": 1.0,
            "eval_samples_per_second": 3.0, "train_loss": 2.0}
    printer = without_speed_figures(PrinterCallback)()
    assert isinstance(printer, PrinterCallback)
    printer.on_log(None, SimpleNamespace(is_local_process_zero=True, is_world_process_zero=True), None,
                   logs=logs)
    printed = capsys.readouterr().out
    assert "train_runtime" in printed and "train_loss" in printed and "per_second" not in printed
    assert len(logs) == 5  # what the Trainer returns and the other callbacks read keeps every key
