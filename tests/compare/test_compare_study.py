"""The study's ratios, reproduced from runs in a real sqlite store that look like train's runs."""

import pytest

from bridgetower_mlflow.compare.flow import CompareOptions, build_comparison

from tests.fakes.synthetic_runs import TrainRunSpec, log_study_runs, log_train_run


@pytest.fixture(scope="module")
def study_store(tmp_path_factory):
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("study")
    client = MlflowClient(f"sqlite:///{root}/mlflow.db")
    experiment_id = client.create_experiment("study", artifact_location=str(root / "artifacts"))
    log_study_runs(client, experiment_id)
    log_train_run(client, experiment_id, TrainRunSpec("h100", 999.0, workers=2, status="FAILED"))
    log_train_run(client, experiment_id, TrainRunSpec("a100", 999.0, workers=2, status="RUNNING"))
    return client


def _section(client, **options):
    comparison, _ = build_comparison(client, CompareOptions(experiment_names=("study",), **options))
    measured = [s for s in comparison.sections if not s.published]
    assert len(measured) == 1
    return comparison, measured[0]


def _row(section, label):
    return next(row for row in section.rows if row.setting.label == label)


def test_gaudi2_over_h100_and_a100_with_two_workers(study_store):
    _, over_h100 = _section(study_store, baseline="h100")
    _, over_a100 = _section(study_store, baseline="a100")
    assert round(_row(over_h100, "w2 decode=cpu").vs_baseline["gaudi2"], 2) == 1.28
    assert round(_row(over_a100, "w2 decode=cpu").vs_baseline["gaudi2"], 2) == 2.23


def test_gaudi2_media_pipeline_best_vs_best(study_store):
    for baseline, expected in (("h100", 1.41), ("a100", 2.45)):
        _, section = _section(study_store, baseline=baseline)
        best = {row.column: row for row in section.best_rows}
        assert best["gaudi2"].best.setting.label == "w2 decode=device"
        assert best["gaudi2"].best.data_loaders == {"habana-mediapipe"}
        assert best[baseline].best.setting.label == "w2 decode=cpu"
        assert round(best["gaudi2"].vs_baseline, 2) == expected


def test_worker_speedups_within_each_accelerator(study_store):
    _, section = _section(study_store)
    two_workers = next(r for r in section.setting_rows if r.setting.label == "w2 decode=cpu")
    speedups = {name: round(value, 2) for name, value in two_workers.vs_baseline_setting.items()}
    assert speedups == {"gaudi2": 1.28, "h100": 1.79, "a100": 1.52}


def test_default_baseline_is_a100_and_unfinished_runs_are_counted(study_store):
    comparison, section = _section(study_store)
    assert section.baseline_column == "a100"
    assert comparison.run_count == 10
    assert comparison.left_out == {"FAILED": 1, "RUNNING": 1}
    assert _row(section, "w2 decode=cpu").cells["h100"].values == [602.1]


def test_published_rows_are_marked_and_reproduce_the_headline(study_store):
    comparison, _ = _section(study_store, reference="study")
    published = [s for s in comparison.sections if s.published]
    assert {s.source for s in published} == {
        "published: HF blog bridgetower (2023-08-29)", "published: optimum-habana CI baseline (2025-02)",
    }
    blog = next(s for s in published if "blog" in s.source)
    assert blog.config["devices"] == "8" and blog.config["per_device_train_batch_size"] == "48"
    best = {row.column: row for row in blog.best_rows}
    assert round(best["gaudi2"].vs_baseline, 2) == 2.45
    ci = next(s for s in published if "CI" in s.source)
    assert ci.rows[0].cells["gaudi2"].median == pytest.approx(904.93)
    assert comparison.run_count == 10  # published rows are not counted as runs
