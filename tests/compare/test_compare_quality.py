"""Time to quality in compare: the quality table, the headline's time to target and quality-differs flag, the CSV
and JSON, the metrics on the compare run and the time-to-quality chart, over runs shaped like train's (real sqlite
store, shared by the module). Every expected figure is computed here from the runs' own numbers."""

import csv
import json
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.compare.analysis.speedups import build_sections
from bridgetower_mlflow.compare.charts.bar_charts import write_charts
from bridgetower_mlflow.compare.command import compare_command
from bridgetower_mlflow.compare.flow import CompareOptions, build_comparison
from bridgetower_mlflow.compare.read.eval_series import fetch_eval_series
from bridgetower_mlflow.compare.read.train_runs import record_from_run

from tests.fakes.synthetic_runs import TrainRunSpec, fake_run, log_train_run

TARGET = "eval_recall_at_5>=0.2"
INTERVAL = 384.0  # samples between evaluations
# each repeat's recall@5 at each evaluation: it stops at the first one >= 0.2 (stop_at_target)
RACE = {
    "gaudi2": ((800.0, (0.05, 0.10, 0.16, 0.21)), (810.0, (0.06, 0.12, 0.17, 0.22)),
               (820.0, (0.05, 0.10, 0.15, 0.19, 0.21))),
    "h100": ((560.0, (0.07, 0.14, 0.25)), (566.0, (0.08, 0.15, 0.26)), (572.0, (0.06, 0.12, 0.18, 0.25))),
}
THROUGHPUT_ONLY = 805.0  # a gaudi2 run of the same configuration without a target: pooled for samples/s only


def evaluations(samples_per_second, values):
    """(clock, samples, recall) per evaluation: the clock runs at the run's pace plus 10 % for evaluations."""
    return tuple(((i + 1) * INTERVAL / samples_per_second * 1.1, (i + 1) * INTERVAL, v) for i, v in enumerate(values))


def race_spec(accel, samples_per_second, values, repeat, target=TARGET):
    found = evaluations(samples_per_second, values)
    return TrainRunSpec(accel, samples_per_second, repeat=repeat, seed=42 + repeat, target=target,
                        samples_to_target=found[-1][1], time_to_target=found[-1][0], eval_samples_interval=INTERVAL,
                        recall_at_5=values[-1], evaluations=found)


def not_reaching(accel, samples_per_second, best, repeat):
    found = evaluations(samples_per_second, (best / 2, best))
    return TrainRunSpec(accel, samples_per_second, repeat=repeat, seed=42 + repeat, target=TARGET,
                        eval_samples_interval=INTERVAL, recall_at_5=best, evaluations=found)


DNF_GAUDI = ((960.0, 10.0), (1152.0, 12.0), (1152.0, 12.5), (1344.0, 14.0), (1536.0, 16.0))  # reached; one more did not


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("quality")
    uri = f"sqlite:///{root}/mlflow.db"
    client = MlflowClient(uri)
    ids = {name: client.create_experiment(name, artifact_location=str(root / "artifacts"))
           for name in ("race", "dnf", "finals")}
    for accel, runs in RACE.items():
        for repeat, (value, curve) in enumerate(runs, 1):
            log_train_run(client, ids["race"], race_spec(accel, value, curve, repeat))
    log_train_run(client, ids["race"], TrainRunSpec("gaudi2", THROUGHPUT_ONLY, repeat=9))
    log_train_run(client, ids["race"], race_spec("a100", 340.0, (0.1, 0.2, 0.31), 1, "eval_recall_at_5>=0.3"))
    for repeat, (samples, seconds) in enumerate(DNF_GAUDI, 1):
        log_train_run(client, ids["dnf"], TrainRunSpec("gaudi2", 800.0, repeat=repeat, target=TARGET, recall_at_5=0.2,
                                                       samples_to_target=samples, time_to_target=seconds))
    log_train_run(client, ids["dnf"], not_reaching("gaudi2", 800.0, 0.18, 6))
    log_train_run(client, ids["dnf"], TrainRunSpec("h100", 560.0, repeat=1, target=TARGET, recall_at_5=0.21,
                                                   samples_to_target=768.0, time_to_target=9.0))
    for repeat, best in ((2, 0.17), (3, 0.19)):
        log_train_run(client, ids["dnf"], not_reaching("h100", 560.0, best, repeat))
    for accel, recall in (("gaudi2", 0.5), ("gaudi3", 0.78), ("h100", 0.8)):  # no target: final quality only
        log_train_run(client, ids["finals"], TrainRunSpec(accel, 700.0, recall_at_5=recall))
    out = root / "race-out"
    race = CliRunner().invoke(compare_command, ["--experiment-name", "race", "--output-dir", str(out)],
                              env={"MLFLOW_TRACKING_URI": uri})
    assert race.exit_code == 0, race.output
    return client, uri, out, race


@pytest.fixture
def compare(store):
    return lambda *args: CliRunner().invoke(compare_command, ["--no-log", *args], env={"MLFLOW_TRACKING_URI": store[1]})


def _median(accel, index):
    """The median over a cell's repeats of one figure of its reaching evaluation (0: clock, 1: samples)."""
    return statistics.median(evaluations(value, curve)[-1][index] for value, curve in RACE[accel])


def _row(text, *starts):
    """The report line whose words start with `starts` (columns are separated by two spaces or more)."""
    rows = [[cell for cell in line.split("  ") if cell.strip()] for line in text.splitlines()]
    found = [[c.strip() for c in row] for row in rows if [c.strip() for c in row[:len(starts)]] == list(starts)]
    assert found, f"no row {starts}"
    return found[0]


def test_the_headline_sets_time_to_target_and_samples_beside_samples_per_second(store):
    text = store[3].output
    speedup = statistics.median([v for v, _ in RACE["gaudi2"]] + [THROUGHPUT_ONLY]) / statistics.median(
        v for v, _ in RACE["h100"])
    to_target = _median("h100", 0) / _median("gaudi2", 0)
    more = round((_median("gaudi2", 1) / _median("h100", 1) - 1) * 100)
    assert (f"* [1] measured gaudi2 vs h100, best vs best: {speedup:.2f}x samples/s, {to_target:.2f}x to {TARGET} "
            f"(gaudi2 needed {more} % more samples); quality differs: eval_recall_at_5 0.21 vs 0.25") in text
    assert more == 33 and f"{to_target:.2f}" == "1.07"  # faster per sample, but it needed a third more samples
    row = _row(text, "[1] measured", "gaudi2 vs h100")
    assert row[-3:] == [f"{to_target:.2f}x to {TARGET} (gaudi2 needed 33 % more samples)"] * 2 + [
        "quality differs: eval_recall_at_5 0.21 vs 0.25"]


def test_runs_with_different_targets_are_never_paired_on_time_to_target(store):
    row = _row(store[3].output, "[1] measured", "gaudi2 vs a100")
    assert row[-3] == row[-2] == ("targets differ, not paired (gaudi2: eval_recall_at_5>=0.2; "
                                  "a100: eval_recall_at_5>=0.3)")
    assert row[-1] == "-"  # no target in common, no run of both without one: nothing to compare


def test_the_quality_table_has_each_cell_per_target_and_no_zeros_where_there_is_no_target(store):
    text = store[3].output
    header = _row(text, "setting", "accelerator", "target")
    assert header[3:] == ["eval_loss", "eval_recall_at_1", "eval_recall_at_5", "reached", "samples to target",
                          "time to target, s", "eval every, samples"]
    h100 = _row(text, "w0 decode=cpu", "h100", TARGET)
    seconds = sorted(evaluations(v, c)[-1][0] for v, c in RACE["h100"])
    assert h100[5:] == ["0.25 (n=3, 0.25-0.26)", "3 of 3", "1,152 (n=3, 1,152-1,536)",
                        f"{seconds[1]:.3g} (n=3, {seconds[0]:.3g}-{seconds[2]:.3g})", "384"]
    plain = _row(text, "w0 decode=cpu", "gaudi2", "none")
    assert plain[3:] == ["0.11 (n=1)", "0.4 (n=1)", "0.8 (n=1)", "-", "-", "-", "-"]


def test_a_repeat_that_did_not_reach_is_dropped_as_the_slowest_and_two_make_the_cell_invalid(compare):
    result = compare("--experiment-name", "dnf")
    assert result.exit_code == 0, result.output
    gaudi = _row(result.output, "w0 decode=cpu", "gaudi2", TARGET)
    samples = sorted(s for s, _ in DNF_GAUDI)
    olympic = statistics.fmean(samples[1:])  # the fastest dropped; the run that never got there is the slowest
    assert gaudi[6:8] == ["5 of 6, 1 did not reach: dropped as the slowest",
                          f"1,152 (n=5, 960-1,536, olympic {olympic:,.0f})"]
    h100 = _row(result.output, "w0 decode=cpu", "h100", TARGET)
    assert h100[6:9] == [f"INVALID: 2 of 3 repeats did not reach {TARGET} (best 0.21)", "-", "-"]
    row = _row(result.output, "[1] measured", "gaudi2 vs h100")
    assert row[-2:] == [f"- to {TARGET} (h100: 2 of 3 repeats did not reach {TARGET})"] * 2  # matched, best


def test_without_a_target_there_is_no_time_to_target_and_quality_differs_only_beyond_spread(compare):
    result = compare("--experiment-name", "finals")
    assert result.exit_code == 0, result.output
    assert "to target" not in result.output and "samples to target" not in result.output
    assert _row(result.output, "setting", "accelerator", "target")[3:] == [
        "eval_loss", "eval_recall_at_1", "eval_recall_at_5"]
    # single runs: each value widened by 5 % of itself; 0.5 vs 0.8 differs, 0.78 vs 0.8 does not
    assert _row(result.output, "[1] measured", "gaudi2 vs h100")[-1] == "quality differs: eval_recall_at_5 0.5 vs 0.8"
    assert _row(result.output, "[1] measured", "gaudi3 vs h100")[-1] == "same within spread"


def test_csv_json_and_the_compare_runs_metrics_carry_the_same(store):
    client, _, out, race = store
    to_target = _median("h100", 0) / _median("gaudi2", 0)
    samples_ratio = _median("gaudi2", 1) / _median("h100", 1)
    with open(out / "headline.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["gpu"] == "h100"]
    assert [(r["cells"], r["target"]) for r in rows] == [("best", TARGET)]
    assert float(rows[0]["time_to_target_speedup"]) == pytest.approx(to_target)
    assert float(rows[0]["samples_to_target_ratio"]) == pytest.approx(samples_ratio)
    assert rows[0]["quality_differs"] == "quality differs: eval_recall_at_5 0.21 vs 0.25"
    document = json.loads((out / "speedups.json").read_text())
    (pair,) = [p for p in document["headline"] if p["gpu"] == "h100"]
    assert pair["quality_differs"] == rows[0]["quality_differs"]
    assert pair["quality"][0]["time_to_target_speedup"] == pytest.approx(to_target)
    quality = {(q["column"], q["target"]): q for q in document["sections"][0]["quality"]}
    assert quality[("gaudi2", TARGET)]["samples_to_target_median"] == _median("gaudi2", 1)
    assert quality[("gaudi2", "")]["samples_to_target_median"] is None  # no target: none, never zero
    run_id = race.output.split("logged compare outputs on run ")[1].split()[0]
    metrics = client.get_run(run_id).data.metrics
    assert metrics["time_to_target_speedup.gaudi2_vs_h100.best"] == pytest.approx(to_target)
    assert metrics["samples_to_target_ratio.gaudi2_vs_h100.w0_cpu"] == pytest.approx(samples_ratio)
    assert not [key for key in metrics if "a100" in key and key.startswith("time_to_target")]
    assert "compare/tables/quality.json" in {a.path for a in client.list_artifacts(run_id, "compare/tables")}


def test_the_chart_races_each_cell_to_the_target_against_time_and_samples(store, tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    client = store[0]
    drawn, savefig = {}, Figure.savefig

    def recording_savefig(figure, path, *args, **kwargs):
        drawn[Path(path).name] = [{line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
                                   for line in axis.lines} for axis in figure.axes]
        return savefig(figure, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    comparison, _ = build_comparison(client, CompareOptions(experiment_names=("race",)))
    series = fetch_eval_series(client, list(comparison.sections))
    assert len(series.series) == 7 and series.left_out == 0  # the runs with a target, not the throughput-only one
    paths = write_charts(comparison, tmp_path, series)
    assert (tmp_path / "time_to_quality.png") in paths and (store[2] / "time_to_quality.png").exists()
    by_time, by_samples, *others = drawn["time_to_quality.png"]
    assert len(others) == 2  # a second row: a100's own target
    # the median repeat by time to the target, as it ran: h100's first (its others reach 0.2 sooner and later)
    median_run = evaluations(*RACE["h100"][0])
    drawn_path = by_time["h100 w0 decode=cpu (median repeat of 3)"]
    assert drawn_path == ([p[0] for p in median_run], [p[2] for p in median_run])
    assert by_samples["gaudi2 w0 decode=cpu (median repeat of 3)"][0] == [384.0, 768.0, 1152.0, 1536.0]
    assert by_time[f"target {TARGET}"][1] == [0.2, 0.2]
    assert sum(1 for label in by_time if label.startswith("_")) == 6  # each repeat, faint behind its cell


def test_the_eval_batch_is_part_of_the_configuration_and_seeds_are_repeats():
    records = [record_from_run(fake_run(TrainRunSpec("cpu", value, devices=1, eval_batch=batch, seed=seed),
                                        f"r{index}"))
               for index, (value, batch, seed) in enumerate(((10.0, 16, 1), (12.0, 16, 2), (11.0, 32, 1)))]
    sections = build_sections(records, None)
    assert [s.config["per_device_eval_batch_size"] for s in sections] == ["16", "32"]
    assert "eval batch/device=16" in sections[0].title()
    assert sections[0].rows[0].cells["cpu"].values == [10.0, 12.0]  # two seeds, one cell of two repeats


def test_a_pair_compared_on_several_targets_names_the_one_whose_quality_differs():
    from bridgetower_mlflow.compare.analysis.headline import build_headline
    from bridgetower_mlflow.compare.analysis.quality_pairs import quality_pairs
    from bridgetower_mlflow.compare.report.quality_tables import quality_verdict

    specs = [("gaudi2", TARGET, 0.21), ("gaudi2", "", 0.5), ("h100", TARGET, 0.22), ("h100", "", 0.8)]
    records = [record_from_run(fake_run(TrainRunSpec(accel, 700.0, target=target, recall_at_5=recall,
                                                     samples_to_target=960.0 if target else None,
                                                     time_to_target=10.0 if target else None), f"r{index}"))
               for index, (accel, target, recall) in enumerate(specs)]
    (pair,) = build_headline(build_sections(records, None))
    assert quality_verdict(quality_pairs(pair.best)) == (
        "quality differs: eval_recall_at_5 0.5 vs 0.8 (target none)")  # 0.21 vs 0.22: single runs, within 5 %
