"""Below the headline: every setting each Gaudi and GPU both ran; peak memory per cell; read progress (pure)."""

import io
import json
from types import SimpleNamespace

import pytest

from bridgetower_mlflow.compare.analysis.headline import build_headline
from bridgetower_mlflow.compare.analysis.speedups import build_sections
from bridgetower_mlflow.compare.comparison import Comparison
from bridgetower_mlflow.compare.read.train_runs import ReadProgress, record_from_run
from bridgetower_mlflow.compare.report import export, render
from bridgetower_mlflow.compare.report.tables import section_tables
from bridgetower_mlflow.contract import PEAK_MEMORY_METRIC

from tests.fakes.synthetic_runs import TrainRunSpec, train_run_contents


def _record(accel, value, run_id, memory=None, **fields):
    params, tags, metrics = train_run_contents(TrainRunSpec(accel, value, **fields))
    if memory is not None:
        metrics[PEAK_MEMORY_METRIC] = memory
    info = SimpleNamespace(run_id=run_id, run_name=tags["mlflow.runName"], experiment_id="1", status="FINISHED")
    return record_from_run(SimpleNamespace(info=info, data=SimpleNamespace(params=params, tags=tags, metrics=metrics)))


def _cells(accel, workers, values, memory=()):
    memory = list(memory) + [None] * (len(values) - len(memory))
    return [_record(accel, v, f"{accel}-w{workers}-{i}", m, workers=workers)
            for i, (v, m) in enumerate(zip(values, memory))]


def _comparison(records, baseline):
    sections = build_sections(records, baseline)
    return Comparison(sections, baseline, (), len(records), {}, ["test (1)"], headline=build_headline(sections))


STUDY_LIKE = (_cells("gaudi2", 0, [600, 610, 590]) + _cells("h100", 0, [330, 340, 336])
              + _cells("a100", 0, [227]) + _cells("gaudi2", 1, [400, 430, 460]) + _cells("h100", 1, [380, 420, 440])
              + _cells("gaudi2", 2, [770]) + _cells("a100", 2, [345]))


def test_every_setting_both_ran_is_shown_whatever_the_baseline():
    comparison = _comparison(STUDY_LIKE, "a100")
    text, markdown = render.to_text(comparison), render.to_markdown(comparison)
    gaudi, h100 = "600.0 (n=3, 590.0-610.0)", "336.0 (n=3, 330.0-340.0)"
    assert any(line.startswith("gaudi2 vs h100") and "w0 decode=cpu" in line and gaudi in line and h100 in line
               and line.endswith(f"{600 / 336:.2f}x") for line in text.splitlines())
    assert f"| gaudi2 vs h100 | [1] measured | w0 decode=cpu | ddp | {gaudi} | {h100} | 1.79x |" in markdown
    assert "| gaudi2 vs h100 | [1] measured | w1 decode=cpu | ddp |" in markdown
    assert "1.02x ~noise |" in markdown  # w1: the min-max ranges overlap
    assert "| gaudi2 vs a100 | [1] measured | w1 decode=cpu |" not in markdown  # a100 did not run w1
    headline = {(p["gaudi"], p["gpu"]): p for p in json.loads(export.to_json(comparison))["headline"]}
    shared = {s["setting"]: s for s in headline[("gaudi2", "h100")]["every_setting"]}
    assert set(shared) == {"w0 decode=cpu", "w1 decode=cpu"}
    assert shared["w0 decode=cpu"]["speedup"] == pytest.approx(600 / 336)
    assert shared["w0 decode=cpu"]["gaudi"] | {"run_ids": []} == {
        "median": 600, "n": 3, "min": 590, "max": 610, PEAK_MEMORY_METRIC: None, "run_ids": []}
    assert [s["within_noise"] for s in shared.values()] == [False, True]
    assert {s["setting"] for s in headline[("gaudi2", "a100")]["every_setting"]} == {"w0 decode=cpu", "w2 decode=cpu"}


def test_peak_memory_shows_beside_samples_per_second_and_in_json():
    records = _cells("gaudi2", 0, [600, 610], memory=[83.1, 83.4]) + _cells("h100", 0, [330, 340])
    comparison = _comparison(records, "h100")
    (section,) = comparison.sections
    (row,) = next(t for t in section_tables(section) if t[0].startswith("Throughput"))[2]
    assert row[1:3] == ["335.0 (n=2, 330.0-340.0)", "605.0 (n=2, 600.0-610.0) 83.4 GB"]  # highest of the runs
    groups = {g["accelerator"]: g for g in json.loads(export.to_json(comparison))["sections"][0]["groups"]}
    assert groups["gaudi2"][PEAK_MEMORY_METRIC] == 83.4 and groups["h100"][PEAK_MEMORY_METRIC] is None
    assert "device_peak_memory_gb" in export.to_csv(comparison).splitlines()[0]


def test_progress_throttles_and_stays_silent_for_one_page():
    now = [0.0]
    stream = io.StringIO()
    progress = ReadProgress(stream, interval=2.0, clock=lambda: now[0])
    for step, more in ((0.0, True), (1.0, True), (2.5, True), (3.0, False)):
        now[0] = step
        progress.page(100, more)
    progress.done()
    assert stream.getvalue().splitlines() == [
        "compare: read 100 runs so far (page 1, more to come)...",
        "compare: read 300 runs so far (page 3, more to come)...",
        "compare: read 400 runs in 4 pages (3.0 s)",
    ]
    quiet = io.StringIO()
    single = ReadProgress(quiet)
    single.page(5, more=False)
    single.done()
    assert quiet.getvalue() == ""
