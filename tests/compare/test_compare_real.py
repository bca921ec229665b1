"""compare on runs the real `train` logged (tiny CPU runs): repeats, noise, prices, and the gate via `mlflow run`."""

import os
import statistics
import subprocess

import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.compare.command import compare_command
from bridgetower_mlflow.compare.flow import CompareOptions, build_comparison
from bridgetower_mlflow.compare.formatting import format_number

from tests.conftest import BIN, mlflow_run
from tests.fakes.synthetic_runs import log_scaled_copy

pytestmark = pytest.mark.slow
# every run evaluates at steps 3 and 6 and aims at a target the first evaluation reaches (training goes on)
TRAIN = ["train", "--accel", "cpu", "--max-steps", "6", "--log-model", "false", "--logging-steps", "2",
         "--per-device-train-batch-size", "8", "--max-eval-samples", "16", "--experiment-name", "real",
         "--eval-steps", "3", "--target", "eval_loss<=100", "--stop-at-target", "false"]
WORKERS = (0, 0, 0, 0, 0, 1)  # five repeats of one cell (olympic average) and one single-run cell
PARALLEL = 2  # the CI machines have two cores; more processes only slow each other


def _train_all(uri: str, root) -> None:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
           "OMP_NUM_THREADS": "1"}  # one torch thread per concurrent run: spinning threads on shared cores waste both
    env = {k: v for k, v in env.items() if k not in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID")}
    pending = list(enumerate(WORKERS))
    while pending:
        batch, pending = pending[:PARALLEL], pending[PARALLEL:]
        procs = [subprocess.Popen([str(BIN / "bridgetower-mlflow"), *TRAIN, "--dataloader-num-workers", str(w),
                                   "--output-dir", str(root / f"out{i}")], env=env, cwd=root,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for i, w in batch]
        for proc in procs:
            output, _ = proc.communicate(timeout=600)
            assert proc.returncode == 0, output[-3000:]


@pytest.fixture(scope="module")
def real(tmp_path_factory, cache_dir):
    """Six real tiny CPU train runs in experiment `real`, and their 10 %-slower copies in `real-slower`."""
    root = tmp_path_factory.mktemp("real")
    uri = f"sqlite:///{root}/mlflow.db"
    client = MlflowClient(uri)
    client.create_experiment("real", artifact_location=str(root / "artifacts"))  # the schema, once
    _train_all(uri, root)
    real_id = client.get_experiment_by_name("real").experiment_id
    slower = client.create_experiment("real-slower", artifact_location=str(root / "artifacts"))
    runs = client.search_runs([real_id], "attributes.status = 'FINISHED'")
    assert len(runs) == len(WORKERS)
    for run in runs:
        log_scaled_copy(client, slower, run, 0.9)
    return client, uri, root


@pytest.fixture
def compare(real, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", real[1])
    return lambda *args: CliRunner().invoke(compare_command, list(args))


def _cells(client, **options):
    comparison, _ = build_comparison(client, CompareOptions(experiment_names=("real",), **options))
    (section,) = comparison.sections
    return comparison, section, {row.setting.label: row.cells["cpu"] for row in section.rows}


def test_real_repeats_show_n_range_olympic_and_a_single_run(real, compare):
    _, _, cells = _cells(real[0])
    repeated, single = cells["w0 decode=cpu"], cells["w1 decode=cpu"]
    assert repeated.n == 5 and single.n == 1
    assert repeated.olympic == pytest.approx(statistics.fmean(sorted(repeated.values)[1:-1]))
    result = compare("--experiment-name", "real", "--no-log")
    assert result.exit_code == 0, result.output
    low, high, olympic = (format_number(v) for v in (repeated.minimum, repeated.maximum, repeated.olympic))
    assert f"(n=5, {low}-{high}, olympic {olympic})" in result.output  # 1 decimal from 10 samples/s, else 3 digits
    assert "(n=1, single run)" in result.output
    assert "No Gaudi-vs-GPU headline: no configuration has both (Gaudi runs: none; GPU runs: none)" in result.output
    runs = _runs_by_workers(real[0])
    tflops = statistics.median(r.data.metrics["train_model_tflops_per_second"] for r in runs[0])  # CPU runs count them
    assert f"{tflops:.3g} TFLOP/s" in result.output
    assert all("train_mfu" not in r.data.metrics and r.data.tags["mfu.note"] for r in runs[0])  # no CPU dense peak
    assert "MFU " not in result.output


def _runs_by_workers(client):
    """The store's own records, read without the product: {workers: [run, ...]}."""
    real_id = client.get_experiment_by_name("real").experiment_id
    found = {}
    trains = "attributes.status = 'FINISHED' and tags.`bridgetower.run_kind` = 'train'"  # not compare's own runs
    for run in client.search_runs([real_id], trains):
        found.setdefault(int(run.data.params["dataloader_num_workers"]), []).append(run)
    return found


def test_real_noise_mark_follows_the_ranges(real, compare):
    runs = _runs_by_workers(real[0])
    repeated = [r.data.metrics["train_samples_per_second"] for r in runs[0]]
    (single,) = [r.data.metrics["train_samples_per_second"] for r in runs[1]]
    inside = min(repeated) <= single <= max(repeated)  # noise: the single run falls inside the repeats' range
    result = compare("--experiment-name", "real", "--no-log")
    setting_rows = result.output.split("Data-loading speedup over w0 decode=cpu")[1].splitlines()
    w1 = next(line for line in setting_rows if line.startswith("w1 decode=cpu"))
    assert ("~noise" in w1) == inside, (w1, repeated, single)


def test_real_prices_give_usd_per_million_samples(real):
    comparison, section, cells = _cells(real[0], prices="cpu=0.10", price_source="a test figure, not a quote")
    from bridgetower_mlflow.compare.report.export import csv_rows

    row = next(r for r in csv_rows(comparison) if r["setting"] == "w0 decode=cpu")
    expected = 0.10 * 1 / (cells["w0 decode=cpu"].median * 3600) * 1e6
    assert row["usd_per_million_samples"] == pytest.approx(expected)


def test_gate_from_real_runs_passes_them_and_fails_a_set_ten_percent_slower(real, compare):
    gate = real[2] / "real-gate.json"
    written = compare("--experiment-name", "real", "--no-log", "--write-gate", str(gate))
    assert written.exit_code == 0, written.output
    assert compare("--experiment-name", "real", "--no-log", "--gate", str(gate)).exit_code == 0
    failed = compare("--experiment-name", "real-slower", "--no-log", "--gate", str(gate))
    assert failed.exit_code == 1
    assert failed.stderr.strip() == f"error: gate: 2 of 2 configurations below 0.95 x {gate}"
    assert compare("--experiment-name", "real-slower", "--no-log", "--gate", str(gate),
                   "--tolerance", "0.85").exit_code == 0


def test_gate_exit_codes_through_mlflow_run(real, compare):
    client, uri, root = real
    gate, rewritten = root / "cli-gate.json", root / "project-gate.json"
    assert compare("--experiment-name", "real", "--no-log", "--write-gate", str(gate)).exit_code == 0
    passed = mlflow_run({"gate": str(gate), "write_gate": str(rewritten), "prices": "cpu=0.10",
                         "price_source": "test figure"}, "real", entry="compare", timeout=300)
    assert passed.returncode == 0, passed.stderr[-3000:]
    assert "passed; 2 checked" in passed.stdout and rewritten.exists()
    failed = mlflow_run({"gate": str(rewritten), "tolerance": "0.95"}, "real-slower", entry="compare", timeout=300)
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert f"error: gate: 2 of 2 configurations below 0.95 x {rewritten}" in failed.stderr
    slower = client.get_experiment_by_name("real-slower").experiment_id
    (run,) = client.search_runs([slower], "tags.`bridgetower.run_kind` = 'compare'")
    assert run.info.status == "FAILED" and "FAILED, 2 below" in run.data.tags["compare.gate_result"]
    real_id = client.get_experiment_by_name("real").experiment_id
    (priced,) = client.search_runs([real_id], "tags.`compare.prices` = 'cpu=0.1'")
    assert priced.data.tags["compare.price_source"] == "test figure" and priced.info.status == "FINISHED"


def test_real_runs_show_what_they_learned_and_how_long_it_took(real, compare, tmp_path):
    """The quality table over real runs: each cell's target, how many repeats reached it, samples (3 steps of 8 rows)
    and seconds to it as the runs logged them, and the time-to-quality chart."""
    runs = _runs_by_workers(real[0])
    seconds = statistics.median(r.data.metrics["time_to_target_seconds"] for r in runs[0])
    assert {r.data.metrics["samples_to_target"] for r in runs[0] + runs[1]} == {24}
    result = compare("--experiment-name", "real", "--no-log", "--output-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    w0 = next(line for line in result.output.splitlines()
              if line.startswith("w0 decode=cpu") and "eval_loss<=100.0" in line)
    assert "5 of 5" in w0 and "24 (n=5" in w0 and format_number(seconds) in w0, w0
    assert (tmp_path / "time_to_quality.png").stat().st_size > 10_000
