"""Every figure a run logs, held to an observer outside the product (tests/truth/truth_observer.py, truth_figures.py):
executed batches counted in the libraries, its own clocks, its own FLOP count, the process tree's CPU from /proc.

Four real CPU runs cover the matrix (tests/truth/truth_harness.py CONFIGS): GA 2 with a remainder and an epoch boundary,
evaluations and checkpoint saves inside the window, a target its first evaluation reaches, 2 workers, warmup 0,
max_steps; its resume from a checkpoint inside that window, between two evaluations, to a target only the second
reaches; GA 2 without a remainder over epochs with a smaller last batch (drop_last off), warmup 3, no workers; two
ranks under torchrun with warmup 2 that stop at their target halfway. The real GaudiTrainer's GA and resume runs
are in tests/truth/test_truth_gaudi.py (.venv-gaudi). Tolerance: samples and steps exact, rates and seconds (the time to
target too) within 3 %, the loader wait within 0.05. The epochs run's params, name and description are held to
the Trainer's own arguments (tests/truth/truth_params.py).
"""

from __future__ import annotations

import pytest

from tests.truth.truth_harness import CONFIGS, run_observed
from tests.truth.truth_params import name_and_description_against_the_trainer, params_against_the_trainer

pytestmark = pytest.mark.slow  # real train subprocesses (one to two minutes each on two busy cores)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("truth")


@pytest.fixture(scope="module")
def ga_remainder(root, cache_dir):
    return run_observed(CONFIGS["ga-remainder"], root)


def test_gradient_accumulation_with_a_remainder_and_what_lies_inside_the_window(ga_remainder):
    """GA 2 over 15 batches an epoch: step 8 runs one batch; 19 batches of 16 = 304 rows, not 10 x 32 = 320. The
    evaluations at steps 5 and 10 (the last one the run ends with, not run again) and the saves at 6 and 10 are in
    the window, timed, and the evaluations are not training's seconds."""
    assert ga_remainder.batches_per_step() == [2] * 7 + [1] + [2, 2]
    assert ga_remainder.metrics["train_measured_samples"] == 304
    assert [step for step, _ in ga_remainder.records[0]["eval_metrics"]] == [5, 10]
    assert len(ga_remainder.records[0]["evals"]) == 2 and ga_remainder.metrics["train_window_eval_seconds"] > 0
    assert ga_remainder.metrics["train_window_save_seconds"] > 0
    assert ga_remainder.wrong() == [], "\n".join(check.line() for check in ga_remainder.checks)


def test_time_to_a_target_the_first_evaluation_reaches(ga_remainder):
    """Reached at step 5 (5 steps of 2 batches of 16 = 160 rows), training on to step 10: the clock to the end of
    that evaluation, with and without its own seconds, held to the observer's clock (the checks above)."""
    assert ga_remainder.tags["target"] == "eval_loss<=1000000.0" and ga_remainder.tags["target.reached"] == "true"
    assert (ga_remainder.metrics["steps_to_target"], ga_remainder.metrics["samples_to_target"]) == (5, 160)
    assert 0 < ga_remainder.metrics["time_to_target_train_seconds"] < ga_remainder.metrics["time_to_target_seconds"]
    assert {"time to target", "training time to target"} <= {check.figure for check in ga_remainder.checks}


def test_loader_workers_cpu_is_what_proc_shows_for_the_workers(ga_remainder):
    (check,) = [check for check in ga_remainder.checks if check.figure == "loader-worker CPU %"]
    assert check.observed > 0 and check.ok, check.line()


def test_a_cpu_run_has_no_mfu_and_says_why(ga_remainder):
    assert "train_mfu" not in ga_remainder.metrics and "cpu" in ga_remainder.tags["mfu.note"]


def only_the_second_evaluation_reaches(uninterrupted) -> str:
    """A target between the uninterrupted run's two eval losses (as the observer read them): the resume, killed
    between the two evaluations, reaches it only after its restart."""
    (_, first), (_, second) = uninterrupted.records[0]["eval_metrics"]
    assert second["eval_loss"] < first["eval_loss"], f"eval_loss did not fall from step 5 to 10: {first} {second}"
    return f"eval_loss<={(first['eval_loss'] + second['eval_loss']) / 2!r}"


@pytest.fixture(scope="module")
def resumed(ga_remainder, root):
    return run_observed(CONFIGS["resume"].with_target(only_the_second_evaluation_reaches(ga_remainder)), root)


def test_a_resume_runs_the_steps_of_the_uninterrupted_run(ga_remainder, resumed):
    assert resumed.batches_per_step() == ga_remainder.batches_per_step()[6:]


def test_a_resume_from_a_checkpoint_inside_the_window_reports_what_it_ran(resumed):
    """From checkpoint-6: the resumed attempt's own window, its skipped batches left out of the rows."""
    assert resumed.tags["resumed.from_step"] == "6" and resumed.metrics["train_measured_steps"] == 4
    assert resumed.metrics["train_measured_samples"] == sum(rows for _, rows in resumed.records[0]["batches"])
    assert resumed.wrong() == [], "\n".join(check.line() for check in resumed.checks)


def test_time_to_a_target_reached_after_a_resume_counts_both_attempts(resumed):
    """Killed at step 7 after its checkpoint at 6, the target reached at step 10: the first attempt's clock to that
    checkpoint plus the resumed one's (the observer's sum), and the rows of all 10 steps (304)."""
    assert resumed.tags["target.reached"] == "true" and resumed.metrics["steps_to_target"] == 10
    assert resumed.metrics["samples_to_target"] == 304
    assert "time to target" in {check.figure for check in resumed.checks}


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
    """Stopped at its target at step 4 of 8: warmup 2 leaves 2 measured steps of 8 rows a rank; samples/s is what
    ran (transformers before 5.19 divides the planned samples by the time)."""
    assert len(two_ranks.records) == 2 and two_ranks.metrics["train_measured_samples"] == 2 * 2 * 8
    assert (two_ranks.metrics["steps_to_target"], two_ranks.metrics["samples_to_target"]) == (4, 2 * 4 * 8)
    assert [len(record["steps"]) for record in two_ranks.records] == [4, 4]
    threads = {record["first_batch"]["torch_threads"] for record in two_ranks.records}
    assert threads == {int(two_ranks.tags["software.torch_threads"])}
    assert two_ranks.wrong() == [], "\n".join(check.line() for check in two_ranks.checks)
