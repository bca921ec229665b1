"""compare shows why: phase shares beside samples/s (tables, CSV, JSON), a stacked bar per cell, and the phase
behind each headline gap; runs without a breakdown show none of it (pure, on train-like records)."""

import json
from pathlib import Path

import pytest

from bridgetower_mlflow.compare.analysis.cost import PriceList
from bridgetower_mlflow.compare.analysis.headline import build_headline
from bridgetower_mlflow.compare.analysis.speedups import build_sections
from bridgetower_mlflow.compare.charts.bar_charts import write_charts
from bridgetower_mlflow.compare.charts.phase_chart import write_phase_chart
from bridgetower_mlflow.compare.charts.plotting import pyplot
from bridgetower_mlflow.compare.comparison import Comparison
from bridgetower_mlflow.compare.read.train_runs import record_from_run
from bridgetower_mlflow.compare.report.export import to_csv, to_json
from bridgetower_mlflow.compare.report.tables import headline_table, section_tables

from tests.fakes.synthetic_runs import TrainRunSpec, fake_run


def record(run_id: str, **fields):
    return record_from_run(fake_run(TrainRunSpec(**fields), run_id))

H100 = (("data_wait", 0.31), ("host_to_device", 0.04), ("forward", 0.2), ("backward", 0.3), ("optimizer", 0.05),
        ("all_reduce", 0.05), ("other", 0.05))
GAUDI2 = (("data_wait", 0.04), ("host_to_device", 0.03), ("forward_backward", 0.7), ("optimizer", 0.08),
          ("all_reduce", 0.1), ("other", 0.05))


def comparison(h100=H100, gaudi2=GAUDI2, h100_rate=600.0, gaudi2_rate=800.0):
    records = [record("h100", accel="h100", samples_per_second=h100_rate, workers=2, phases=h100,
                      bottleneck="input"),
               record("gaudi2", accel="gaudi2", samples_per_second=gaudi2_rate, workers=2, phases=gaudi2,
                      bottleneck="compute")]
    sections = build_sections(records, None)
    return Comparison(sections, None, (), 2, {}, ["t (1)"], headline=build_headline(sections))


def test_the_headline_says_which_phase_explains_most_of_the_gap():
    (pair,) = comparison().headline
    assert pair.why == "h100 waits 31 % on data, gaudi2 4 %"
    caption, headers, rows = headline_table(comparison().headline, PriceList())
    assert headers[-1] == "why: the phase behind most of the gap" and rows[0][-1] == pair.why


def test_a_merged_forward_backward_is_compared_with_the_other_sides_sum():
    # the GPU is slower and loses its time in compute: its forward + backward (30 + 55 %) against Gaudi's merged 60 %
    gpu = (("data_wait", 0.05), ("forward", 0.3), ("backward", 0.55), ("optimizer", 0.05), ("other", 0.05))
    gaudi = (("data_wait", 0.2), ("forward_backward", 0.6), ("optimizer", 0.1), ("other", 0.1))
    (pair,) = comparison(h100=gpu, gaudi2=gaudi).headline
    assert pair.why == "h100 spends 85 % in forward+backward, gaudi2 60 %"


def test_seconds_per_step_decide_where_both_sides_have_them():
    # equal shares of data wait, but the slower side's step is longer: the phase with the most extra seconds wins
    same = (("data_wait", 0.5), ("forward", 0.2), ("backward", 0.3))
    (pair,) = comparison(h100=same, gaudi2=same, h100_rate=400.0).headline
    assert pair.why == "h100 waits 50 % on data, gaudi2 50 %"  # 0.5 x (1/400 - 1/800) s: the largest gap


def test_phase_shares_sit_beside_samples_per_second_in_the_tables_csv_and_json():
    (section,) = comparison().sections
    caption, headers, rows = next(t for t in section_tables(section) if t[0].startswith("Where the step goes"))
    assert headers == ["setting", "accelerator", "samples/s", "data wait", "to device", "forward", "backward",
                       "fwd+bwd", "optimizer", "all-reduce", "other", "bottleneck"]
    assert rows == [["w2 decode=cpu", "h100", "600.0", "31 %", "4 %", "20 %", "30 %", "-", "5 %", "5 %", "5 %",
                     "input"],
                    ["w2 decode=cpu", "gaudi2", "800.0", "4 %", "3 %", "-", "-", "70 %", "8 %", "10 %", "5 %",
                     "compute"]]
    groups = {g["accelerator"]: g for g in json.loads(to_json(comparison()))["sections"][0]["groups"]}
    assert groups["gaudi2"]["train_phase_forward_backward_fraction"] == pytest.approx(0.7)
    assert "train_phase_forward_fraction" not in groups["gaudi2"]  # merged on Gaudi: absent, never 0
    header = to_csv(comparison()).splitlines()[0].split(",")
    assert "train_phase_data_wait_fraction" in header and "train_phase_forward_backward_fraction" in header


def test_what_an_epochs_first_step_cost_sits_beside_the_phases_where_runs_logged_it():
    records = [record(f"w1-{n}", accel="cpu", samples_per_second=130.0 + n, workers=1, devices=1, phases=H100,
                      epoch_start_fraction=share) for n, share in enumerate((0.44, 0.40, 0.46))]
    records += [record("w0", accel="cpu", samples_per_second=100.0, devices=1, phases=H100)]  # no epoch ended
    (section,) = build_sections(records, None)
    cpu_only = Comparison([section], None, (), 2, {}, ["t (1)"])
    caption, headers, rows = next(t for t in section_tables(section) if t[0].startswith("Where the step goes"))
    assert headers[-2:] == ["epoch start", "bottleneck"]
    assert [(row[0], row[-2]) for row in rows] == [("w0 decode=cpu", "-"), ("w1 decode=cpu", "44 %")]
    groups = {g["setting"]: g for g in json.loads(to_json(cpu_only))["sections"][0]["groups"]}
    assert groups["w1 decode=cpu"]["train_epoch_start_extra_fraction"] == pytest.approx(0.44)
    assert "train_epoch_start_extra_fraction" not in groups["w0 decode=cpu"]
    assert "train_epoch_start_extra_fraction" in to_csv(cpu_only).splitlines()[0].split(",")
    plain = next(t for t in section_tables(comparison().sections[0]) if t[0].startswith("Where the step goes"))
    assert "epoch start" not in plain[1]  # no run logged it: no column of dashes


def test_runs_without_phases_have_no_phase_columns_anywhere():
    older = comparison(h100=(), gaudi2=())
    (section,) = older.sections
    assert not any(t[0].startswith("Where the step goes") for t in section_tables(section))
    assert not any("phase" in name for name in to_csv(older).splitlines()[0].split(","))
    (pair,) = older.headline
    assert pair.why is None and "why: the phase behind most of the gap" not in headline_table([pair], PriceList())[1]


def test_a_stacked_bar_per_accelerator_and_setting(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    heights, savefig = {}, Figure.savefig

    def recording_savefig(figure, path, *args, **kwargs):
        (axis,) = figure.axes
        heights[Path(path).name] = [(patch.get_x(), patch.get_height()) for patch in axis.patches]
        return savefig(figure, path, *args, **kwargs)

    (tmp_path / "older").mkdir()
    paths = write_charts(comparison(h100=(), gaudi2=()), tmp_path / "older")
    assert "phases.png" not in {p.name for p in paths}
    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    write_phase_chart(pyplot(), comparison().sections, tmp_path)
    bars = {}
    for x, height in heights["phases.png"]:
        bars[round(x, 2)] = bars.get(round(x, 2), 0.0) + height
    assert sorted(round(total, 6) for total in bars.values()) == [100.0, 100.0]  # each bar stacks to the whole step
