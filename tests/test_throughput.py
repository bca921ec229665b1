"""Throughput maths: one rule on every accelerator, global over ranks, no figure from warmup alone."""

import pytest

from bridgetower_mlflow.contract import input_bound_label
from bridgetower_mlflow.telemetry.throughput import RankThroughput, combine_ranks


def test_global_throughput_sums_ranks_over_the_slowest_window():
    ranks = [RankThroughput(steps=10, samples=480, seconds=4.0, wait_seconds=0.4, total_seconds=6,
                            total_wait_seconds=1),
             RankThroughput(steps=10, samples=480, seconds=5.0, wait_seconds=1.5, total_seconds=7,
                            total_wait_seconds=2)]
    figures = combine_ranks(ranks)
    assert figures["train_samples_per_second"] == pytest.approx(960 / 5.0)
    assert figures["train_samples_per_second_per_device"] == pytest.approx(96.0)
    assert figures["dataloader_wait_fraction"] == pytest.approx(0.3)  # the most input-bound rank


def test_no_measured_step_gives_no_throughput_but_a_wait():
    ranks = [RankThroughput(steps=0, samples=0, seconds=0.0, wait_seconds=0.0, total_seconds=2, total_wait_seconds=1)]
    assert combine_ranks(ranks) == {"dataloader_wait_fraction": 0.5, "dataloader_wait_fraction_all_steps": 0.5}


@pytest.mark.parametrize("fraction,label", [(0.0, "no"), (0.049, "no"), (0.05, "moderate"), (0.199, "moderate"),
                                            (0.2, "high"), (0.9, "high")])
def test_input_bound_bands(fraction, label):
    assert input_bound_label(fraction) == label


class _Sink:
    def __init__(self):
        self.logged = []

    def log_metric(self, key, value, step):
        self.logged.append((key, value, step))


def _drive(warmup: int, steps: int, start: int = 0):
    """The callback as the Trainer calls it: train begin, one on_step_end per optimizer step, train end."""
    from types import SimpleNamespace

    from bridgetower_mlflow.telemetry.throughput import ThroughputCallback

    callback = ThroughputCallback(_Sink(), lambda: None, samples_per_step=8, warmup_steps=warmup, logging_steps=5)
    state = SimpleNamespace(global_step=start)
    callback.on_train_begin(None, state, None)
    for step in range(start + 1, start + steps + 1):
        state.global_step = step
        callback.on_step_end(None, state, None)
    callback.on_train_end(None, state, None)
    return callback.result(per_rank_samples_per_step=8)


@pytest.mark.parametrize("warmup, start", [(0, 0), (0, 20), (3, 0), (3, 20)])
def test_every_step_past_the_warmup_is_measured_warmup_zero_included(warmup, start):
    """GaudiTrainingArguments' own default is throughput_warmup_steps=0: the window then opens at train begin."""
    result = _drive(warmup, steps=10, start=start)
    assert (result.steps, result.samples) == (10 - warmup, (10 - warmup) * 8)
    assert result.seconds > 0 and combine_ranks([result])["train_samples_per_second"] > 0
