"""compare's headline, cost and published references, on train-like runs in a real sqlite store."""

import json

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.compare.command import compare_command
from bridgetower_mlflow.compare.flow import CompareOptions, build_comparison, run_compare
from bridgetower_mlflow.compare.read import train_runs as records_module
from bridgetower_mlflow.compare.references.published import ALL_CAVEATS
from bridgetower_mlflow.compare.report import export, render
from bridgetower_mlflow.contract import PEAK_MEMORY_METRIC

from tests.fakes.synthetic_runs import TrainRunSpec, log_study_runs, log_train_run

FOUR_RATIOS = {("gaudi2", "h100"): (1.28, 1.41), ("gaudi2", "a100"): (2.23, 2.45)}
PRICES = "gaudi2=1.20,h100=2.50,a100=1.10"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("headline")
    uri = f"sqlite:///{root}/mlflow.db"
    client = MlflowClient(uri)
    study = client.create_experiment("study", artifact_location=str(root / "artifacts"))
    log_study_runs(client, study)
    cpu = client.create_experiment("cpu-only", artifact_location=str(root / "artifacts"))
    log_train_run(client, cpu, TrainRunSpec("cpu", 2.0, devices=1, batch=8))
    return client, uri


@pytest.fixture
def cli(store, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store[1])
    return lambda *args: CliRunner().invoke(compare_command, list(args))


def _ratios(pairs):
    return {(p.gaudi, p.gpu): (round(p.matched.speedup, 2), round(p.best.speedup, 2)) for p in pairs}


@pytest.mark.parametrize("baseline", [None, "h100", "gaudi2", "a100"])
def test_headline_is_gaudi_vs_each_gpu_whatever_the_baseline(store, baseline):
    comparison, _ = build_comparison(store[0], CompareOptions(experiment_names=("study",), baseline=baseline))
    assert _ratios(comparison.headline) == FOUR_RATIOS
    assert {p.matched_setting.label for p in comparison.headline} == {"w2 decode=cpu"}
    assert {p.best.gaudi.setting.label for p in comparison.headline} == {"w2 decode=device"}


def test_headline_is_the_first_table_and_the_per_baseline_tables_stay(cli):
    result = cli("--experiment-name", "study", "--no-log", "--baseline", "h100")
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.index("== Headline: Gaudi vs GPU") < text.index("Throughput (samples/s) and speedup over h100")
    lines = {line.split()[4]: line for line in text.splitlines() if line.startswith("[1] measured")}
    assert "1.28x" in lines["h100"] and "1.41x" in lines["h100"]
    assert "2.23x" in lines["a100"] and "2.45x" in lines["a100"]
    assert "(n=1, single run)" in lines["h100"]


def test_study_reference_shows_the_four_ratios_on_published_rows(store):
    comparison, _ = build_comparison(store[0], CompareOptions(experiment_names=("study",), reference="study"))
    published = [p for p in comparison.headline if p.section.published]
    assert _ratios(published) == FOUR_RATIOS
    assert {p.section.source for p in published} == {"published: HF blog bridgetower (2023-08-29)"}
    assert any(note.startswith("H200: no published BridgeTower") for note in comparison.notes)


def _published_values(comparison):
    return {(s.source, g.accelerator, g.config.get("per_device_train_batch_size"), g.median)
            for s in comparison.sections if s.published for row in s.rows for g in row.cells.values()}


def test_all_reference_adds_ci_history_gaudi3_intel_and_the_first_blog_version(store):
    study, _ = build_comparison(store[0], CompareOptions(experiment_names=("study",), reference="study"))
    every, _ = build_comparison(store[0], CompareOptions(experiment_names=("study",), reference="all"))
    added = _published_values(every) - _published_values(study)
    assert _published_values(study) <= _published_values(every)
    values = {(accel, batch, value) for _, accel, batch, value in added}
    assert {("gaudi2", "48", v) for v in (921.069, 930.245, 918.387)} <= values
    assert ("gaudi3", "48", 783.481) in values and ("gaudi2", "40", 1031.0) in values
    assert {("gaudi2", "40", v) for v in (532.4, 639.7, 705.9, 802.1)} <= values
    assert {("a100", "32", 210.5), ("a100", "32", 296.6)} <= values
    assert all(source.startswith("published: ") for source, *_ in added)
    first_version = [p for p in every.headline if "first version" in p.section.source]
    assert first_version == []  # batch 40 vs 32: never side by side unless --allow-diff says so


# The blog's first version, Gaudi2 b40 over A100 b32: (speedup, compared at the same setting?)
FIRST_VERSION_PAIRS = {"w0 decode=cpu ddp": (2.53, True), "w1 decode=cpu ddp": (2.16, True),
                       "w1 decode=cpu fast_ddp": (2.38, False), "w1 decode=device fast_ddp": (2.70, False)}
PAIR_CAPTION = "published pair, each device at its own largest batch: gaudi2 b40 vs a100 b32"


def _has_row(text, *parts):
    return any(all(part in line for part in parts) for line in text.splitlines())


def test_all_reference_shows_the_first_versions_published_pairs_in_text_markdown_and_json(store, cli):
    result = cli("--experiment-name", "cpu-only", "--reference", "all", "--no-log")
    assert result.exit_code == 0, result.output
    comparison, _ = build_comparison(store[0], CompareOptions(experiment_names=("cpu-only",), reference="all"))
    markdown = render.to_markdown(comparison, ALL_CAVEATS)
    for text in (result.stdout, markdown):
        assert PAIR_CAPTION in text
        for setting, (speedup, matched) in FIRST_VERSION_PAIRS.items():
            assert _has_row(text, setting, f"{speedup:.2f}x", "matched" if matched else "a100's fastest"), setting
        assert _has_row(text, "w0 decode=cpu ddp", "532.4 (n=1, single run) 83.4 GB", "210.5 (n=1, single run)")
    (pair,) = json.loads(export.to_json(comparison, ALL_CAVEATS))["published_pairs"]
    assert (pair["gaudi"], pair["gaudi_batch"], pair["gpu"], pair["gpu_batch"]) == ("gaudi2", "40", "a100", "32")
    assert {r["gaudi_setting"]: (round(r["speedup"], 2), r["matched"]) for r in pair["rows"]} == FIRST_VERSION_PAIRS
    assert {r["gaudi"][PEAK_MEMORY_METRIC] for r in pair["rows"]} == {83.39}
    assert result.stderr == ""  # one page of runs: no progress lines


def test_reads_of_more_than_one_page_report_progress_on_stderr_only(cli, monkeypatch):
    quiet = cli("--experiment-name", "study", "--no-log")
    assert quiet.exit_code == 0 and quiet.stderr == ""  # one page: silent
    monkeypatch.setattr(records_module, "PAGE_SIZE", 4)
    result = cli("--experiment-name", "study", "--no-log")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == "compare: read 4 runs so far (page 1, more to come)..."
    assert lines[-1].startswith("compare: read 10 runs in 4 pages (")  # 4 + 4 + 2 finished, then the unfinished
    assert "compare: read" not in result.stdout and result.stdout.startswith("10 finished train runs")


def test_no_gaudi_gpu_pair_says_why(cli):
    result = cli("--experiment-name", "cpu-only", "--no-log")
    assert result.exit_code == 0, result.output
    assert "No Gaudi-vs-GPU headline: no configuration has both (Gaudi runs: none; GPU runs: none)" in result.output


def test_prices_add_usd_per_million_samples_and_are_recorded(store, cli, tmp_path):
    result = cli("--experiment-name", "study", "--prices", PRICES, "--price-source", "example list, 2026-11",
                 "--output-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    gaudi_best = 1.20 * 8 / (847.7 * 3600) * 1e6
    h100_best = 2.50 * 8 / (602.1 * 3600) * 1e6
    headline = json.loads((tmp_path / "speedups.json").read_text())["headline"]
    pair = next(p for p in headline if p["gpu"] == "h100" and p["section"] == 1)
    assert pair["gaudi_best_usd_per_million_samples"] == pytest.approx(gaudi_best)
    assert pair["gpu_best_usd_per_million_samples"] == pytest.approx(h100_best)
    assert f"${gaudi_best:,.2f}" in result.output and f"{h100_best / gaudi_best:.2f}x" in result.output
    assert "Cost: USD per million samples" in result.output
    assert "source: example list, 2026-11" in result.output
    run_id = result.output.split("logged compare outputs on run ")[1].split()[0]
    tags = store[0].get_run(run_id).data.tags
    assert tags["compare.prices"] == "gaudi2=1.2,h100=2.5,a100=1.1"
    assert tags["compare.price_source"] == "example list, 2026-11"
    assert (tmp_path / "efficiency.png").read_bytes()[:4] == b"\x89PNG"  # a cost panel, nothing measured


def test_without_prices_no_cost_is_shown(store):
    outcome = run_compare(CompareOptions(experiment_names=("study",), log_to_mlflow=False), store[0])
    assert "USD" not in outcome.text and "$" not in outcome.text


@pytest.mark.parametrize("prices", ["gaudi2", "gaudi2=cheap", "tpu=1.0", "gaudi2=-1", "gaudi2=0",
                                    "gaudi2=1,gaudi2=2", "gaudi2=nan"])
def test_bad_prices_are_one_line_naming_the_field_exit_2(cli, prices):
    result = cli("--experiment-name", "study", "--no-log", "--prices", prices)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: prices: invalid value") and len(result.stderr.strip().splitlines()) == 1
    assert "USD per device-hour" in result.stderr and "gaudi2" in result.stderr


def test_a_price_source_needs_prices(cli):
    result = cli("--experiment-name", "study", "--no-log", "--price-source", "vendor X")
    assert result.exit_code == 2 and result.stderr.startswith("error: price_source: invalid value 'vendor X'")
