"""The truth harness on the real GaudiTrainer (optimum-habana 1.21.2 on transformers 4.55, CPU mode, the fake HPU
bridge): gradient accumulation with a remainder, and a resume from a checkpoint inside the window, each figure held
to the observer (tests/truth/truth_harness.py). Runs in .venv-gaudi (`make test-gaudi`); elsewhere it is skipped.
"""

from __future__ import annotations

import pytest

pytest.importorskip("optimum.habana", reason="the Gaudi stack (optimum-habana 1.21.2) runs in .venv-gaudi")

from tests.truth.truth_harness import CONFIGS, run_observed
from tests.truth.truth_params import name_and_description_against_the_trainer, params_against_the_trainer

pytestmark = [pytest.mark.slow, pytest.mark.gaudi_stack]  # real train subprocesses


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("truth-gaudi")


@pytest.fixture(scope="module")
def gaudi_ga(root, cache_dir):
    return run_observed(CONFIGS["gaudi-ga"], root)


def test_gaudi_trainer_counts_the_gradient_accumulation_remainder_as_it_ran(gaudi_ga):
    assert gaudi_ga.tags["gaudi.path"] == "optimum-habana" and gaudi_ga.tags["software.optimum_habana"] == "1.21.2"
    assert gaudi_ga.batches_per_step() == [2] * 7 + [1] + [2, 2]
    assert gaudi_ga.metrics["train_measured_samples"] == 19 * 16
    assert gaudi_ga.wrong() == [], "\n".join(check.line() for check in gaudi_ga.checks)


def test_gaudi_runs_params_name_and_description_say_what_the_gaudi_trainer_ran_with(gaudi_ga):
    record = gaudi_ga.records[0]
    assert record["training_args"] and params_against_the_trainer(gaudi_ga.params, record, gaudi_ga.run_id) == []
    assert name_and_description_against_the_trainer(gaudi_ga.tags, record["training_args"]) == []


def test_gaudi_trainer_resumes_inside_the_window_with_the_steps_of_the_uninterrupted_run(gaudi_ga, root):
    resumed = run_observed(CONFIGS["gaudi-resume"], root)
    assert resumed.tags["resumed.from_step"] == "6" and resumed.metrics["train_measured_steps"] == 4
    assert resumed.batches_per_step() == gaudi_ga.batches_per_step()[6:]
    assert resumed.metrics["train_measured_samples"] == 7 * 16
    assert resumed.wrong() == [], "\n".join(check.line() for check in resumed.checks)
