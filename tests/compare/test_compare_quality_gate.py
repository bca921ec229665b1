"""The gate holds quality: --write-gate records each configuration's target metric and samples to target (MLPerf's
reference convergence point); --gate fails a set that learned worse, needed more samples, no longer reaches the
target, or reached it in markedly fewer samples than the reference (suspicious). Through the click command, on a
real sqlite store shared by the module."""

import json
import math

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.compare.analysis.convergence import Convergence, convergence_of, fewest_allowed
from bridgetower_mlflow.compare.command import compare_command

from tests.fakes.synthetic_runs import TrainRunSpec, log_train_run

TARGET = "eval_recall_at_5>=0.2"
REFERENCE = (960.0, 1152.0, 1152.0, 1152.0, 1344.0)  # samples to target of the gate's five repeats
INTERVAL = 192.0
SETS = {  # experiment -> (each repeat's samples to target, None: not reached; final recall@5)
    "reference": (REFERENCE, 0.25),
    "same": (REFERENCE, 0.25),
    "worse": (REFERENCE, 0.21),  # 16 % below the gate's 0.25
    "slower": ((1344.0,) * 5, 0.25),  # 17 % more samples
    "suspicious": ((768.0,) * 5, 0.25),  # a third fewer: a leak or an easier eval set, not a speedup
    "lost": ((1152.0, 1152.0, 1152.0, None, None), 0.25),
}


def _log_set(client, experiment_id, samples, recall):
    for repeat, value in enumerate(samples, 1):
        log_train_run(client, experiment_id, TrainRunSpec(
            "gaudi2", 800.0, repeat=repeat, seed=repeat, target=TARGET, samples_to_target=value,
            time_to_target=None if value is None else value / 80, eval_samples_interval=INTERVAL,
            recall_at_5=recall if value is not None else 0.19))
    log_train_run(client, experiment_id, TrainRunSpec("h100", 560.0))  # no target: throughput only


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("quality-gate")
    uri = f"sqlite:///{root}/mlflow.db"
    client = MlflowClient(uri)
    for name, (samples, recall) in SETS.items():
        _log_set(client, client.create_experiment(name, artifact_location=str(root / "artifacts")), samples, recall)
    gate = root / "gate.json"
    written = CliRunner().invoke(compare_command, ["--experiment-name", "reference", "--no-log", "--write-gate",
                                                   str(gate)], env={"MLFLOW_TRACKING_URI": uri})
    assert written.exit_code == 0, written.output
    return client, uri, gate


@pytest.fixture
def compare(store):
    return lambda *args: CliRunner().invoke(compare_command, [*args, "--gate", str(store[2])],
                                            env={"MLFLOW_TRACKING_URI": store[1]})


def _lines(result, verdict):
    return [line.strip() for line in result.stdout.splitlines() if line.strip().startswith(verdict)]


def test_the_gate_records_each_targets_quality_and_its_reference_convergence_point(store):
    entries = {e["key"]["accelerator"]: e for e in json.loads(store[2].read_text())["entries"]}
    assert entries["h100"]["quality"] == []  # no target, nothing but samples/s to hold
    (quality,) = entries["gaudi2"]["quality"]
    assert (quality["target"], quality["metric"], quality["final_median"], quality["reached"]) == (
        TARGET, "eval_recall_at_5", 0.25, 5)
    middle = sorted(REFERENCE)[1:-1]  # olympic: the fastest and the slowest dropped from 5 runs
    assert quality["samples_to_target"] == {"mean": sum(middle) / 3, "std": 0.0, "n": 3, "interval": INTERVAL}
    assert quality["samples_to_target_median"] == 1152.0 and quality["samples_to_target_values"] == list(REFERENCE)
    assert entries["gaudi2"]["key"]["per_device_eval_batch_size"] == "16"


def test_the_same_runs_pass_their_own_gate_quality_included(compare):
    result = compare("--experiment-name", "same", "--no-log")
    assert result.exit_code == 0, result.output
    assert "): passed; 2 checked, 0 gated targets not run here" in result.output
    assert any(line.endswith("(+0.0% vs gate)") and "eval_recall_at_5 0.25 (median, n=5) >= 0.9 x 0.25" in line
               for line in _lines(result, "ok"))


def test_a_set_that_learned_worse_fails_with_a_line_like_below(compare, store):
    result = compare("--experiment-name", "worse")
    assert result.exit_code == 1
    (line,) = set(_lines(result, "WORSE"))
    assert line.startswith("WORSE gaudi2 w0 decode=cpu |") and "eval batch/device=16" in line
    assert line.endswith("eval_recall_at_5 0.21 (median, n=5) < 0.9 x 0.25 = 0.225 (-16.0% vs gate)")
    assert result.stderr.strip() == (f"error: gate: 1 of 2 quality checks failed against {store[2]} (worse by "
                                     "more than 0.1, or suspicious)")
    client = store[0]
    experiment = client.get_experiment_by_name("worse").experiment_id
    (run,) = client.search_runs([experiment], "tags.`bridgetower.run_kind` = 'compare'")
    assert (run.data.metrics["gate_passed"], run.data.metrics["gate_quality_failed"]) == (0.0, 1.0)
    assert compare("--experiment-name", "worse", "--no-log", "--quality-tolerance", "0.2").exit_code == 0


def test_more_samples_to_target_or_a_target_no_longer_reached_fails(compare):
    slower = compare("--experiment-name", "slower", "--no-log")
    assert slower.exit_code == 1
    (line,) = set(_lines(slower, "WORSE"))
    assert line.endswith(f"1,344 samples to {TARGET} (median, n=5) > 1.1 x 1,152 = 1,267 (+16.7% vs gate)")
    lost = compare("--experiment-name", "lost", "--no-log")
    assert lost.exit_code == 1
    (line,) = set(_lines(lost, "WORSE"))
    assert line.endswith(f"{TARGET} not reached (2 of 5 repeats did not reach {TARGET}); the gate's runs reached it "
                         "in 1,152 samples (median)")


def test_converging_in_markedly_fewer_samples_than_the_reference_is_suspicious_not_celebrated(compare):
    result = compare("--experiment-name", "suspicious", "--no-log")
    assert result.exit_code == 1
    (line,) = set(_lines(result, "SUSPICIOUS"))
    fewest = 1152 - 2.131847 * (INTERVAL / math.sqrt(12)) * math.sqrt(1 / 3 + 1 / 3)  # t(0.95, 4); sd 0: rounding
    assert f"768 samples to {TARGET} (mean, n=3) < {fewest:,.0f}, the fewest the gate's runs allow" in line
    assert "mean 1,152, sd 0, n=3; MLPerf's one-sided t-test, alpha 0.05" in line
    assert "1 suspicious" in result.output and not _lines(result, "WORSE")  # fewer samples never fails as 'more'


def test_the_fewest_allowed_is_where_mlperfs_one_sided_t_test_stops_rejecting():
    """MLPerf's Llama2-70B-LoRA RCP at batch 8: mean 3179 samples, sd 300 over 20 reference runs (18 once olympic),
    checked against 10-run submissions (8 once olympic); its table lists a max speedup of 7.4 %."""
    from scipy.stats import ttest_ind_from_stats

    reference = Convergence(mean=3179.0, std=300.0, n=18)
    fewest = fewest_allowed(reference, 8)
    for mean, rejected in ((fewest - 1, True), (fewest + 1, False)):
        t_stat, p_value = ttest_ind_from_stats(mean, 300.0, 8, 3179.0, 300.0, 18, equal_var=True)
        assert bool(t_stat < 0 and p_value / 2 < 0.05) is rejected  # MLPerf's two-sided p made one-sided
    assert 3179.0 / fewest - 1 == pytest.approx(0.074, abs=0.001)
    assert fewest_allowed(Convergence(1000.0, 50.0, 1), 5) is None  # one reference run has no spread to test
    assert convergence_of([5.0, 1.0, 3.0, 4.0, 2.0]) == Convergence(3.0, math.sqrt(2 / 3), 3)


@pytest.mark.parametrize("value", ["abc", "1.5", "-0.1"])
def test_a_bad_quality_tolerance_is_one_line_exit_2(compare, value):
    result = compare("--experiment-name", "same", "--no-log", "--quality-tolerance", value)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: quality_tolerance: invalid value {value!r}; allowed: a number from 0 to below 1, e.g. 0.1 (fail "
        "when the target metric is 10 % worse or samples to target 10 % more)"]


def test_a_gate_written_before_time_to_quality_still_checks_its_cells(store, tmp_path):
    """No eval batch in its keys (it was not a configuration key yet), no quality: samples/s alone is checked."""
    document = json.loads(store[2].read_text())
    for entry in document["entries"]:
        del entry["key"]["per_device_eval_batch_size"]
        del entry["quality"]
    older = tmp_path / "older-gate.json"
    older.write_text(json.dumps(document))
    result = CliRunner().invoke(compare_command, ["--experiment-name", "worse", "--no-log", "--gate", str(older)],
                                env={"MLFLOW_TRACKING_URI": store[1]})
    assert result.exit_code == 0, result.output
    assert "passed; 2 checked, 0 in the gate but not here" in result.output and "Quality (" not in result.output
