"""Pure grouping and speedup logic: identity, repeats, allow_diff, warmup separation, normalization."""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from bridgetower_mlflow.compare.analysis.headline import build_headline
from bridgetower_mlflow.compare.analysis.speedups import build_sections, parse_allow_diff
from bridgetower_mlflow.compare.read.train_runs import record_from_run
from bridgetower_mlflow.errors import ConfigError

from tests.fakes.synthetic_runs import TrainRunSpec, train_run_contents


def _run(spec: TrainRunSpec, run_id="r", **param_overrides):
    params, tags, metrics = train_run_contents(spec)
    params.update(param_overrides)
    info = SimpleNamespace(run_id=run_id, run_name=tags["mlflow.runName"], experiment_id="1", status="FINISHED")
    return SimpleNamespace(info=info, data=SimpleNamespace(params=params, tags=tags, metrics=metrics))


def _record(accel, value, run_id="r", **spec_fields):
    return record_from_run(_run(TrainRunSpec(accel, value, **spec_fields), run_id))


def test_raw_mlflow_run_spellings_are_normalized():
    spellings = [("True", "2"), ("1", "2.0"), ("true", "2")]
    records = [
        record_from_run(_run(TrainRunSpec("gaudi2", 800.0 + i, workers=2, device_decode=True, raw_bool=flag),
                             f"r{i}", dataloader_num_workers=workers))
        for i, (flag, workers) in enumerate(spellings)
    ]
    (section,) = build_sections(records, None)
    (row,) = section.rows
    assert row.setting.label == "w2 decode=device"
    assert row.cells["gaudi2"].n == 3 and row.cells["gaudi2"].median == 801.0


def test_repeats_give_median_min_max_and_speedup_is_ratio_of_medians():
    records = [_record("a100", v, f"a{v}", workers=2) for v in (100.0, 110.0, 300.0)]
    records += [_record("gaudi2", v, f"g{v}", workers=2) for v in (200.0, 220.0)]
    (section,) = build_sections(records, "a100")
    cell = section.rows[0].cells["a100"]
    assert (cell.median, cell.minimum, cell.maximum, cell.n) == (110.0, 100.0, 300.0, 3)
    assert section.rows[0].vs_baseline["gaudi2"] == pytest.approx(210.0 / 110.0)


def test_different_batch_is_a_curve_never_side_by_side_unless_allowed():
    records = [_record("a100", 100.0, "a", batch=32), _record("gaudi2", 300.0, "g", batch=40)]
    (curve,) = build_sections(records, None)  # one section: batch size is an axis, drawn as a curve
    assert curve.axes == ("per_device_train_batch_size",) and "per_device_train_batch_size" not in curve.config
    assert [(row.label, list(row.cells)) for row in curve.rows] == [("w0 decode=cpu b32", ["a100"]),
                                                                    ("w0 decode=cpu b40", ["gaudi2"])]
    assert build_headline([curve]) == []  # never paired across batch sizes
    (together,) = build_sections(records, "a100", parse_allow_diff("per_device_train_batch_size"))
    assert together.columns == ["a100", "gaudi2"]
    assert together.differences == {"per_device_train_batch_size": {"a100": "32", "gaudi2": "40"}}
    assert together.rows[0].vs_baseline["gaudi2"] == pytest.approx(3.0)


def test_allowed_key_varying_within_one_accelerator_splits_its_columns():
    records = [_record("gaudi2", 300.0, "g40", batch=40), _record("gaudi2", 330.0, "g48", batch=48),
               _record("a100", 100.0, "a", batch=32)]
    (section,) = build_sections(records, "a100", ("per_device_train_batch_size",))
    assert section.columns == ["a100", "gaudi2 [batch/device=40]", "gaudi2 [batch/device=48]"]
    assert section.rows[0].cells["gaudi2 [batch/device=48]"].values == [330.0]


def test_warmup_rules_are_never_mixed():
    records = [_record("a100", 100.0, "a", warmup_steps=0), _record("gaudi2", 300.0, "g", warmup_steps=3)]
    sections = build_sections(records, None, parse_allow_diff("per_device_train_batch_size"))
    assert sorted(s.warmup for s in sections) == ["0", "3"]
    with pytest.raises(ConfigError, match="throughput_warmup_steps"):
        parse_allow_diff("throughput_warmup_steps")


def test_fallback_to_cpu_loader_is_its_own_setting():
    asked = _run(TrainRunSpec("h100", 500.0, workers=2, device_decode=True, loader="torch-cpu"), "fallback")
    records = [record_from_run(asked), _record("h100", 480.0, "cpu", workers=2)]
    (section,) = build_sections(records, None)
    assert [row.setting.label for row in section.rows] == ["w2 decode=cpu", "w2 decode=cpu-fallback"]


def test_missing_baseline_gives_no_speedups_and_setting_speedups_still_work():
    records = [_record("cpu", 10.0, "w0", workers=0), _record("cpu", 15.0, "w1", workers=1)]
    (section,) = build_sections(records, "a100")
    assert section.baseline_column is None
    assert section.rows[1].vs_baseline == {"cpu": None}
    assert section.setting_rows[1].vs_baseline_setting["cpu"] == pytest.approx(1.5)


def test_run_without_throughput_is_not_a_record():
    run = _run(TrainRunSpec("cpu", 1.0))
    del run.data.metrics["train_samples_per_second"]
    assert record_from_run(run) is None


def test_devices_come_from_the_accelerator_count_tag():
    record = _record("h100", 100.0, devices=4)
    assert record.devices == "4"
    assert replace(record, devices="8") != record


def test_the_study_image_backend_is_never_pooled_with_the_fast_one():
    fast = record_from_run(_run(TrainRunSpec("cpu", 100.0, workers=1), "fast", image_backend="fast"))
    study = record_from_run(_run(TrainRunSpec("cpu", 20.0, workers=1), "study", image_backend="study"))
    older = record_from_run(_run(TrainRunSpec("cpu", 101.0, workers=1), "older"))  # before the option: fast
    sections = build_sections([fast, study, older], None)
    assert len(sections) == 2
    pooled = {frozenset(cell.run_ids) for section in sections for row in section.rows for cell in row.cells.values()}
    assert pooled == {frozenset({"fast", "older"}), frozenset({"study"})}


def test_runs_whose_hf_args_differ_are_never_pooled_as_repeats():
    """hf_args changes what a run measures (persistent loader workers: 227 against 131 samples/s on the demo)."""
    spec = TrainRunSpec("cpu", 0.0, workers=1)
    persistent = [record_from_run(_run(replace(spec, samples_per_second=v), f"p{v}",
                                       hf_args=text))
                  for v, text in ((227.5, "--dataloader_persistent_workers true"),
                                  (226.0, "--dataloader_persistent_workers=True"))]
    restarting = [record_from_run(_run(replace(spec, samples_per_second=v), f"r{v}", hf_args=""))
                  for v in (127.1, 131.9)]
    older = record_from_run(_run(replace(spec, samples_per_second=129.0), "older"))  # no hf_args param at all
    sections = build_sections([*persistent, *restarting, older], None)
    pooled = {frozenset(cell.run_ids) for section in sections for row in section.rows for cell in row.cells.values()}
    assert pooled == {frozenset({"p227.5", "p226.0"}), frozenset({"r127.1", "r131.9", "older"})}
    (with_flag,) = [s for s in sections if s.config.get("hf_args")]
    assert with_flag.config["hf_args"] == "--dataloader_persistent_workers=true"
    assert len(build_sections([*persistent, *restarting], None, parse_allow_diff("hf_args"))) == 1
