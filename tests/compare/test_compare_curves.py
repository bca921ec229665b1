"""Axes as curves: runs differing only in devices, batch size or strategy share one section; scaling efficiency,
the all-reduce share, the curve charts, and the headline only at equal batch size (pure, on train-like records)."""

from pathlib import Path
from statistics import median

import pytest

from bridgetower_mlflow.compare.analysis.headline import build_headline
from bridgetower_mlflow.compare.analysis.scaling import scaling_points
from bridgetower_mlflow.compare.analysis.speedups import build_sections
from bridgetower_mlflow.compare.charts.bar_charts import write_charts
from bridgetower_mlflow.compare.comparison import Comparison
from bridgetower_mlflow.compare.read.train_runs import record_from_run
from bridgetower_mlflow.compare.report.render import to_text
from bridgetower_mlflow.compare.report.tables import section_tables

from tests.fakes.synthetic_runs import TrainRunSpec, fake_run

# samples/s of three repeats per device count: per device 10, 9 and 7 (efficiency 90 % at 2, 70 % at 4)
CPU_RUNS = {1: (9.9, 10.0, 10.1), 2: (17.8, 18.0, 18.2), 4: (27.6, 28.0, 28.4)}
ALL_REDUCE = (("data_wait", 0.1), ("forward", 0.3), ("backward", 0.4), ("all_reduce", 0.15), ("other", 0.05))


def record(run_id: str, **fields):
    return record_from_run(fake_run(TrainRunSpec(**fields), run_id))


def cpu_records(runs=CPU_RUNS, **fields):
    return [record(f"cpu-d{devices}-{i}", accel="cpu", samples_per_second=value, devices=devices, batch=8,
                   model="tiny", host_cpu_count=2, **fields)
            for devices, values in runs.items() for i, value in enumerate(values)]


def _table(section, caption_start):
    return next(t for t in section_tables(section) if t[0].startswith(caption_start))


def test_devices_are_one_section_with_scaling_efficiency_against_one_device():
    (section,) = build_sections(cpu_records(), None)
    assert section.axes == ("devices",) and [p.label for p in section.points] == ["d1", "d2", "d4"]
    found = {p.devices: (p.per_device, p.efficiency, p.base_devices) for p in scaling_points(section)}
    base = median(CPU_RUNS[1])  # observer: per-device samples/s from the runs' own numbers
    for devices, values in CPU_RUNS.items():
        per_device = median(v / devices for v in values)
        assert found[devices][0] == pytest.approx(per_device)
        assert found[devices][1] == pytest.approx(per_device / base) and found[devices][2] == 1
    assert [round(found[n][1], 2) for n in (1, 2, 4)] == [1.0, 0.9, 0.7]
    caption, headers, rows = _table(section, "Scaling over devices")
    assert headers == ["line", "devices", "samples/s", "per device", "scaling efficiency (per device vs 1 device)"]
    assert [row[1:2] + row[3:] for row in rows] == [["1", "10.0", "100 %"], ["2", "9", "90 %"],
                                                      ["4", "7", "70 %"]]
    text = to_text(Comparison([section], None, (), 9, {}, ["t (1)"]))
    assert "cpu: devices are processes (torchrun ranks) sharing the host's 2 cores" in text
    assert "Curves over devices 1, 2, 4 (one section" in text


def test_without_one_device_the_fewest_measured_is_the_named_baseline():
    (section,) = build_sections(cpu_records({2: (18.0,), 4: (28.0,)}), None)
    found = {p.devices: p for p in scaling_points(section)}
    assert found[4].base_devices == 2 and found[4].efficiency == pytest.approx((28.0 / 4) / (18.0 / 2))
    rows = _table(section, "Scaling over devices")[2]
    assert rows[1][4] == "78 % (vs 2: 1 not measured)"


def test_the_all_reduce_share_shows_where_measured_and_nowhere_else():
    (measured,) = build_sections(cpu_records(phases=ALL_REDUCE), None)
    headers, rows = _table(measured, "Scaling over devices")[1:]
    assert headers[-1] == "all-reduce share of the step" and [row[-1] for row in rows] == ["15 %"] * 3
    (older,) = build_sections(cpu_records(), None)  # runs from before the breakdown: no column, never 0 %
    assert "all-reduce share of the step" not in _table(older, "Scaling over devices")[1]
    assert not any(t[0].startswith("Where the step goes") for t in section_tables(older))


def test_headline_pairs_only_at_equal_batch_and_devices():
    records = [record(f"{accel}-{batch}-{devices}", accel=accel, samples_per_second=value * devices,
                      batch=batch, devices=devices)
               for accel, batch, value in (("gaudi2", 40, 500.0), ("gaudi2", 32, 450.0), ("a100", 32, 200.0))
               for devices in (1, 8)]
    (section,) = build_sections(records, None)
    assert section.axes == ("devices", "per_device_train_batch_size")
    pairs = build_headline([section])
    assert sorted((p.point.label, round(p.best.speedup, 2)) for p in pairs) == [("d1 b32", 2.25), ("d8 b32", 2.25)]


def test_curve_charts_draw_repeats_the_ideal_line_and_the_largest_batch(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    drawn, savefig = {}, Figure.savefig

    def recording_savefig(figure, path, *args, **kwargs):
        drawn[Path(path).name] = [(axis.get_xlabel(), [line.get_linestyle() for line in axis.lines
                                                       if len(line.get_xdata())],  # not the legend's entry
                                   [text.get_text() for text in axis.texts]) for axis in figure.axes]
        return savefig(figure, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    records = []
    for batch in (8, 16):
        records += [record(f"b{batch}-d{d}-{i}", accel="cpu", samples_per_second=v * (1.2 if batch == 16 else 1),
                           devices=d, batch=batch, model="tiny", peak_memory_gb=batch / 4)
                    for d, values in CPU_RUNS.items() for i, v in enumerate(values)]
    sections = build_sections(records, None)
    paths = write_charts(Comparison(sections, None, (), len(records), {}, []), tmp_path)
    assert {p.name for p in paths} >= {"scaling.png", "batch_size.png"} and "phases.png" not in drawn
    throughput, per_device, memory = drawn["scaling.png"]
    assert throughput[0] == "devices" and throughput[1].count("--") == 2  # one ideal line per curve (b8, b16)
    assert per_device[1].count("--") == 2 and "--" not in memory[1]  # memory has no ideal
    batch_panels = drawn["batch_size.png"]
    assert batch_panels[0][0] == "batch size per device"
    assert batch_panels[0][2] == ["cpu: largest b16"]  # marked once per accelerator
    assert (tmp_path / "scaling.png").read_bytes()[:4] == b"\x89PNG"
