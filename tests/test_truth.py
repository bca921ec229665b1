"""Every figure a run logs, held to an observer outside the product (tests/truth_observer.py, truth_figures.py):
executed batches counted in the libraries, its own clocks, its own FLOP count, the process tree's CPU from /proc.

Four real CPU runs cover the matrix (tests/truth_harness.py CONFIGS): GA 2 with a remainder and an epoch boundary,
an evaluation and a checkpoint save inside the window, 2 workers, warmup 0, max_steps; its resume from a
checkpoint inside that window; GA 2 without a remainder over epochs with a smaller last batch (drop_last off),
warmup 3, no workers; two ranks under torchrun with warmup 2. The real GaudiTrainer's GA and resume runs are in
tests/test_truth_gaudi.py (.venv-gaudi). Tolerance: samples and steps exact, rates and seconds within 3 %, the
loader wait within 0.05. The epochs run's params, name and description are held to the Trainer's own arguments
(tests/truth_params.py).
"""

from __future__ import annotations

import pytest
from truth_harness import CONFIGS, run_observed
from truth_params import name_and_description_against_the_trainer, params_against_the_trainer

pytestmark = pytest.mark.slow  # real train subprocesses (one to two minutes each on two busy cores)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("truth")


@pytest.fixture(scope="module")
def ga_remainder(root, cache_dir):
    return run_observed(CONFIGS["ga-remainder"], root)


def test_gradient_accumulation_with_a_remainder_and_what_lies_inside_the_window(ga_remainder):
    """GA 2 over 15 batches an epoch: step 8 runs one batch; 19 batches of 16 = 304 rows, not 10 x 32 = 320. The
    evaluations at steps 5 and 10 and the saves at 6 and 10 are in the window, and timed."""
    assert ga_remainder.batches_per_step() == [2] * 7 + [1] + [2, 2]
    assert ga_remainder.metrics["train_measured_samples"] == 304
    assert len(ga_remainder.records[0]["evals"]) >= 2 and ga_remainder.metrics["train_window_eval_seconds"] > 0
    assert ga_remainder.metrics["train_window_save_seconds"] > 0
    assert ga_remainder.wrong() == [], "\n".join(check.line() for check in ga_remainder.checks)


def test_loader_workers_cpu_is_what_proc_shows_for_the_workers(ga_remainder):
    (check,) = [check for check in ga_remainder.checks if check.figure == "loader-worker CPU %"]
    assert check.observed > 0 and check.ok, check.line()


def test_a_cpu_run_has_no_mfu_and_says_why(ga_remainder):
    assert "train_mfu" not in ga_remainder.metrics and "cpu" in ga_remainder.tags["mfu.note"]


@pytest.fixture(scope="module")
def resumed(ga_remainder, root):
    return run_observed(CONFIGS["resume"], root)


def test_a_resume_runs_the_steps_of_the_uninterrupted_run(ga_remainder, resumed):
    assert resumed.batches_per_step() == ga_remainder.batches_per_step()[6:]


def test_a_resume_from_a_checkpoint_inside_the_window_reports_what_it_ran(resumed):
    """From checkpoint-6: the resumed attempt's own window, its skipped batches left out of the rows."""
    assert resumed.tags["resumed.from_step"] == "6" and resumed.metrics["train_measured_steps"] == 4
    assert resumed.metrics["train_measured_samples"] == sum(rows for _, rows in resumed.records[0]["batches"])
    assert resumed.wrong() == [], "\n".join(check.line() for check in resumed.checks)


@pytest.fixture(scope="module")
def epochs(root, cache_dir):
    return run_observed(CONFIGS["epochs"], root)


def test_the_params_name_and_description_say_what_the_trainer_ran_with(epochs):
    """Every logged param that is a TrainingArguments field against the Trainer's own arguments at train start (the
    observer's record; keys mapped, not compared, are explained in truth_params.MAPPED)."""
    record = epochs.records[0]
    assert record["training_args"] and params_against_the_trainer(epochs.params, record, epochs.run_id) == []
    assert name_and_description_against_the_trainer(epochs.tags, record["training_args"]) == []


def test_epochs_without_a_remainder_and_a_smaller_last_batch(epochs):
    """240 rows in batches of 25 without drop_last: 9 of 25 and one of 15 an epoch; GA 2: 5 steps an epoch, 2
    epochs; warmup 3 leaves out 6 batches (150 rows): 7 steps and 330 rows measured."""
    assert epochs.batches_per_step() == [2] * 10
    assert [rows for _, rows in epochs.records[0]["batches"]][8:10] == [25, 15]
    assert (epochs.metrics["train_measured_steps"], epochs.metrics["train_measured_samples"]) == (7, 330)
    assert epochs.wrong() == [], "\n".join(check.line() for check in epochs.checks)


@pytest.fixture(scope="module")
def two_ranks(root, cache_dir):
    return run_observed(CONFIGS["two-ranks"], root)


def test_two_ranks_sum_their_rows_over_the_slowest_window_and_say_their_threads(two_ranks):
    assert len(two_ranks.records) == 2 and two_ranks.metrics["train_measured_samples"] == 2 * 6 * 8
    threads = {record["first_batch"]["torch_threads"] for record in two_ranks.records}
    assert threads == {int(two_ranks.tags["software.torch_threads"])}
    assert two_ranks.wrong() == [], "\n".join(check.line() for check in two_ranks.checks)
