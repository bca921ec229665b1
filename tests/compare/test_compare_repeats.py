"""Repeats (n, min-max, olympic average), noise marking and efficiency columns/panels: pure, on records."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from bridgetower_mlflow.compare.analysis.cost import PriceList
from bridgetower_mlflow.compare.analysis.headline import build_headline
from bridgetower_mlflow.compare.analysis.speedups import build_sections
from bridgetower_mlflow.compare.analysis.stats import olympic_mean
from bridgetower_mlflow.compare.charts.bar_charts import efficiency_panels, write_charts
from bridgetower_mlflow.compare.comparison import Comparison
from bridgetower_mlflow.compare.read.train_runs import record_from_run
from bridgetower_mlflow.compare.report.tables import format_cell, section_tables

from tests.fakes.synthetic_runs import TrainRunSpec, train_run_contents


def _record(accel, value, run_id, **fields):
    params, tags, metrics = train_run_contents(TrainRunSpec(accel, value, **fields))
    info = SimpleNamespace(run_id=run_id, run_name=tags["mlflow.runName"], experiment_id="1", status="FINISHED")
    return record_from_run(SimpleNamespace(info=info, data=SimpleNamespace(params=params, tags=tags, metrics=metrics)))


def _records(accel, values, **fields):
    return [_record(accel, v, f"{accel}-{i}", **fields) for i, v in enumerate(values)]


def _table(section, caption_start):
    return next(t for t in section_tables(section) if t[0].startswith(caption_start))


def test_olympic_average_drops_best_and_worst_from_five_runs():
    assert olympic_mean([10.0, 1.0, 4.0, 5.0, 6.0]) == pytest.approx(5.0)
    assert olympic_mean([1.0, 2.0, 3.0, 100.0, 4.0, 5.0]) == pytest.approx(3.5)
    assert olympic_mean([1.0, 2.0, 3.0, 4.0]) is None


def test_cells_show_n_and_range_olympic_from_five_runs_and_mark_a_single_run():
    (section,) = build_sections(_records("h100", [600, 610, 590, 650, 605]) + _records("a100", [340]), "a100")
    row = section.rows[0]
    assert format_cell(row.cells["h100"]) == "605.0 (n=5, 590.0-650.0, olympic 605.0) noisy 9.9%"  # 60 / 605
    assert format_cell(row.cells["a100"]) == "340.0 (n=1, single run)"
    three = build_sections(_records("h100", [600, 610, 590]), None)[0].rows[0].cells["h100"]
    assert format_cell(three) == "600.0 (n=3, 590.0-610.0)"


def test_speedups_whose_ranges_overlap_are_marked_within_noise():
    overlapping = _records("gaudi2", [400, 430, 460]) + _records("h100", [380, 420, 440])
    (section,) = build_sections(overlapping, "h100")
    rows = _table(section, "Throughput")[2]
    assert rows[0][-1] == "1.02x ~noise"
    apart = _records("gaudi2", [500, 510, 520]) + _records("h100", [380, 420, 440])
    (section,) = build_sections(apart, "h100")
    assert _table(section, "Throughput")[2][0][-1] == "1.21x"
    assert _table(section, "Best setting")[2][1][-1] == "1.21x"
    assert _table(section, "Best setting")[2][0][-1] == "1.00x"  # the baseline against itself
    assert _table(section, "Data-loading")[2][0][1:] == ["1.00x", "1.00x"]
    (pair,) = build_headline([section])
    assert not pair.best.within_noise and pair.best.speedup == pytest.approx(510 / 420)


def test_two_single_runs_are_never_called_noise():
    (section,) = build_sections(_records("gaudi2", [400]) + _records("h100", [400]), "h100")
    assert _table(section, "Throughput")[2][0][-1] == "1.00x"


def test_tflops_mfu_and_energy_show_only_where_measured(tmp_path):
    measured = _records("h100", [600, 610], tflops=120.0, mfu=0.38, joules_per_sample=2.5)
    unmeasured = _records("a100", [340, 350], model="tiny")
    sections = build_sections(measured + unmeasured, None)  # two models: two sections
    with_efficiency = next(s for s in sections if "h100" in s.columns)
    without = next(s for s in sections if "a100" in s.columns)
    caption, headers, rows = _table(with_efficiency, "Efficiency")
    assert rows == [["w0 decode=cpu", "120.0 TFLOP/s, MFU 38.0%, 2.5 J/sample"]]
    assert not any(t[0].startswith("Efficiency") for t in section_tables(without))
    assert [label for label, _ in efficiency_panels(with_efficiency, PriceList())] == [
        "MFU, % of dense peak (measured)", "energy per sample, J (measured)"]
    assert efficiency_panels(without, PriceList()) == []
    priced = PriceList({"a100": 1.1})
    assert [label for label, _ in efficiency_panels(without, priced)] == ["USD per million samples (given prices)"]
    comparison = Comparison([with_efficiency, without], None, (), 4, {}, [])
    assert (tmp_path / "efficiency.png") in write_charts(comparison, tmp_path)
    nothing = Comparison([without], None, (), 2, {}, [])
    (tmp_path / "none").mkdir()
    assert not any(p.name == "efficiency.png" for p in write_charts(nothing, tmp_path / "none"))


def test_headline_pairs_every_gaudi_with_every_gpu_even_without_a_shared_setting():
    records = (_records("gaudi3", [900], workers=2, device_decode=True) + _records("gaudi2", [800], workers=2)
               + _records("h200", [700], workers=0) + _records("cpu", [20], workers=2))
    (section,) = build_sections(records, "cpu")
    pairs = {(p.gaudi, p.gpu): p for p in build_headline([section])}
    assert set(pairs) == {("gaudi2", "h200"), ("gaudi3", "h200")}  # cpu is neither; baseline does not matter
    unmatched = pairs[("gaudi2", "h200")]
    assert unmatched.matched_setting is None and unmatched.matched is None
    assert unmatched.best.speedup == pytest.approx(800 / 700)
    assert pairs[("gaudi3", "h200")].best.gaudi.setting.label == "w2 decode=device"


def test_a_speedup_panel_with_one_accelerator_says_why_it_is_empty(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    texts, savefig = {}, Figure.savefig

    def recording_savefig(figure, path, *args, **kwargs):
        texts[Path(path).name] = [[t.get_text() for t in axis.texts] for axis in figure.axes]
        return savefig(figure, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    runs = _records("cpu", [90, 95], devices=1) + [_record("cpu", 70, "cpu-w1", workers=1, devices=1)]
    write_charts(Comparison(build_sections(runs, None), None, (), 3, {}, []), tmp_path)
    accelerator_panel, settings_panel = texts["speedups.png"]
    assert any("only cpu measured" in text for text in accelerator_panel), accelerator_panel
    assert not any("measured in this configuration" in text for text in settings_panel)
