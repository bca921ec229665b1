"""compare's results on its own run, read back as a user would (metrics, mlflow.load_table); MLPerf-style repeats
(failed repeats kept, one dropped as the slowest, two make a cell invalid); the phase behind a headline's gap.
Runs shaped like train's and the sweep's, in a real sqlite store."""

import pytest

from bridgetower_mlflow.compare.flow import CompareOptions, build_comparison, run_compare
from bridgetower_mlflow.compare.report.render import to_text
from bridgetower_mlflow.contract import COMPARE_CELLS_TABLE, COMPARE_HEADLINE_TABLE, COMPARE_SCALING_TABLE

from tests.fakes.synthetic_runs import TrainRunSpec, log_train_run

GPU_PHASES = (("data_wait", 0.31), ("host_to_device", 0.04), ("forward", 0.2), ("backward", 0.3),
              ("optimizer", 0.05), ("all_reduce", 0.05), ("other", 0.05))
GAUDI_PHASES = (("data_wait", 0.04), ("host_to_device", 0.03), ("forward_backward", 0.7), ("optimizer", 0.08),
                ("all_reduce", 0.1), ("other", 0.05))
# (accel, batch, devices) -> samples/s of two repeats
MEASURED = {("gaudi2", 16, 1): (500.0, 505.0), ("h100", 16, 1): (400.0, 404.0),
            ("gaudi2", 32, 1): (560.0, 566.0), ("h100", 32, 1): (430.0, 434.0),
            ("gaudi2", 32, 2): (1000.0, 1010.0), ("h100", 32, 2): (800.0, 808.0)}


@pytest.fixture
def store(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("results", artifact_location=str(tmp_path / "artifacts"))
    return client, experiment_id


def _log_measured(client, experiment_id, phases=True):
    for (accel, batch, devices), values in MEASURED.items():
        for repeat, value in enumerate(values, 1):
            log_train_run(client, experiment_id, TrainRunSpec(
                accel, value, workers=2, batch=batch, devices=devices, repeat=repeat,
                phases=(GAUDI_PHASES if accel == "gaudi2" else GPU_PHASES) if phases else ()))


def test_headline_ratios_and_tables_are_logged_with_stable_keys_and_read_back_with_load_table(store, monkeypatch):
    import mlflow

    client, experiment_id = store
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", experiment_id)  # load_table reads the current experiment
    _log_measured(client, experiment_id)
    ids = [run_compare(CompareOptions(experiment_names=("results",)), client).logged_run_id for _ in range(2)]
    first, second = (client.get_run(run_id).data.metrics for run_id in ids)
    points = ("d1.b16", "d1.b32", "d2.b32")
    assert set(first) == set(second) == {f"speedup.gaudi2_vs_h100.{what}.{point}"
                                         for what in ("w2_cpu", "best") for point in points}
    for (accel, batch, devices), values in MEASURED.items():  # observer: the logged runs' own numbers
        if accel == "gaudi2":
            expected = sum(values) / 2 / (sum(MEASURED[("h100", batch, devices)]) / 2)
            assert first[f"speedup.gaudi2_vs_h100.w2_cpu.d{devices}.b{batch}"] == pytest.approx(expected)
    cells = mlflow.load_table(COMPARE_CELLS_TABLE, run_ids=ids, extra_columns=["run_id"])
    assert len(cells) == 2 * len(MEASURED) and set(cells["run_id"]) == set(ids)
    mine = cells[cells["run_id"] == ids[0]].set_index(["accelerator", "per_device_train_batch_size", "devices"])
    assert mine.loc[("h100", 32, 2), "median"] == pytest.approx(804.0)
    assert mine.loc[("h100", 32, 2), "train_phase_data_wait_fraction"] == pytest.approx(0.31)
    headline = mlflow.load_table(COMPARE_HEADLINE_TABLE, run_ids=ids)
    assert sorted(set(headline["point"])) == ["d1 b16", "d1 b32", "d2 b32"]
    assert set(headline["why"]) == {"h100 waits 31 % on data, gaudi2 4 %"}
    scaling = mlflow.load_table(COMPARE_SCALING_TABLE, run_ids=ids[:1])
    h100 = scaling[(scaling["accelerator"] == "h100") & (scaling["devices"] == 2)]
    assert h100["scaling_efficiency"].item() == pytest.approx((804.0 / 2) / 432.0)


def test_two_gaudi_gpu_pairs_in_one_plain_configuration_keep_the_short_key(store):
    client, experiment_id = store
    for accel, value in (("gaudi2", 700.0), ("h100", 600.0), ("a100", 300.0)):
        log_train_run(client, experiment_id, TrainRunSpec(accel, value, workers=2))
    run_id = run_compare(CompareOptions(experiment_names=("results",)), client).logged_run_id
    metrics = client.get_run(run_id).data.metrics
    assert metrics == {"speedup.gaudi2_vs_h100.w2_cpu": pytest.approx(700 / 600),
                       "speedup.gaudi2_vs_h100.best": pytest.approx(700 / 600),
                       "speedup.gaudi2_vs_a100.w2_cpu": pytest.approx(700 / 300),
                       "speedup.gaudi2_vs_a100.best": pytest.approx(700 / 300)}


def test_the_gate_verdict_is_logged_as_metrics(store, tmp_path):
    client, experiment_id = store
    _log_measured(client, experiment_id, phases=False)
    gate = tmp_path / "gate.json"
    run_compare(CompareOptions(experiment_names=("results",), log_to_mlflow=False, write_gate=str(gate)), client)
    passed = run_compare(CompareOptions(experiment_names=("results",), gate=str(gate)), client)
    assert client.get_run(passed.logged_run_id).data.metrics["gate_passed"] == 1.0
    for repeat in (3, 4):
        log_train_run(client, experiment_id, TrainRunSpec("h100", 300.0, workers=2, batch=16, devices=1,
                                                          repeat=repeat))
    failed = run_compare(CompareOptions(experiment_names=("results",), gate=str(gate)), client)
    metrics = client.get_run(failed.logged_run_id).data.metrics
    assert metrics["gate_passed"] == 0.0  # h100 b16 d1: median of 400, 404, 300, 300 is 350 < 0.95 x 402
    assert metrics["gate_worst_ratio"] == pytest.approx(350.0 / 402.0)


def _sweep_cell(client, experiment_id, parent, cell, values, failures):
    for repeat, value in enumerate(values, 1):
        log_train_run(client, experiment_id, TrainRunSpec(
            "cpu", value, devices=int(cell[-1]), batch=8, model="tiny", parent_run_id=parent, sweep_cell=cell,
            repeat=repeat))
    for repeat in range(len(values) + 1, len(values) + len(failures) + 1):
        log_train_run(client, experiment_id, TrainRunSpec(
            "cpu", 0.0, devices=int(cell[-1]), batch=8, model="tiny", parent_run_id=parent, sweep_cell=cell,
            repeat=repeat, status="FAILED", error=failures[repeat - len(values) - 1]))


def test_failed_repeats_one_dropped_as_the_slowest_two_make_the_cell_invalid(store):
    client, experiment_id = store
    parent = client.create_run(experiment_id).info.run_id
    _sweep_cell(client, experiment_id, parent, "w0 decode=cpu d1", [10.0, 10.2], ["train exited with 3"])
    _sweep_cell(client, experiment_id, parent, "w0 decode=cpu d2", [17.0], ["out of memory", "train exited with 1"])
    _sweep_cell(client, experiment_id, parent, "w0 decode=cpu d4", [], ["killed", "killed", "killed"])
    comparison, _ = build_comparison(client, CompareOptions(parent_run_id=parent))
    (section,) = comparison.sections
    (row,) = section.rows  # d2 is invalid: out of every comparison
    cell = row.cells["cpu"]
    assert (cell.n, len(cell.failures), cell.invalid) == (2, 1, "")
    (invalid,) = section.invalid
    assert invalid.invalid == "2 of 3 repeats failed (out of memory)"
    text = to_text(comparison)
    assert "10.1 (n=2 of 3, 1 failed: dropped as the slowest, 10.0-10.2)" in text
    assert "INVALID, left out of every comparison: cpu w0 decode=cpu d2: 2 of 3 repeats failed (out of memory)" \
        in text
    assert f"Sweep {parent} cell 'w0 decode=cpu d4': all 3 repeats failed, nothing to compare (killed)" in text
    assert comparison.left_out == {"FAILED": 6}


def test_a_cell_whose_repeats_spread_more_than_five_percent_is_noisy(store):
    client, experiment_id = store
    for repeat, value in enumerate((100.0, 104.0, 106.0), 1):  # (106 - 100) / 104 = 5.8 %
        log_train_run(client, experiment_id, TrainRunSpec("h100", value, repeat=repeat))
    for repeat, value in enumerate((100.0, 102.0, 104.0), 1):  # 4 / 102 = 3.9 %
        log_train_run(client, experiment_id, TrainRunSpec("a100", value, repeat=repeat))
    comparison, _ = build_comparison(client, CompareOptions(experiment_names=("results",)))
    (row,) = comparison.sections[0].rows
    assert row.cells["h100"].noisy and not row.cells["a100"].noisy
    text = to_text(comparison)
    assert "104.0 (n=3, 100.0-106.0) noisy 5.8%" in text
    assert "102.0 (n=3, 100.0-104.0) noisy" not in text and "102.0 (n=3, 100.0-104.0)" in text


def test_runs_without_phases_show_no_phase_columns_and_no_why(store):
    client, experiment_id = store
    _log_measured(client, experiment_id, phases=False)
    outcome = run_compare(CompareOptions(experiment_names=("results",), log_to_mlflow=False), client)
    assert "Where the step goes" not in outcome.text and "why:" not in outcome.text
    assert all(pair.why is None for pair in outcome.comparison.headline)
