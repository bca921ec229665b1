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
