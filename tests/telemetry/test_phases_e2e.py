"""Real runs (tiny preset, CPU) log where a step goes: the phase breakdown and its series, the step-time spread,
the achievable matmul rate and MFU against it, the verdict, and the profiler window's trace and table (the
trace read back holds exactly the asked steps; the profiled steps are out of the measured window). Two ranks
(the launcher's torchrun) log a non-zero all-reduce phase."""

from __future__ import annotations

import gzip
import json

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.contract import BOTTLENECKS, PHASES

from tests.conftest import mlflow_run, run_cli

pytestmark = pytest.mark.slow
STEPS, WARMUP, PROFILED = 10, 3, (5, 6)


def _run(uri):
    (run,) = MlflowClient(uri).search_runs(["0"])
    assert run.info.status == "FINISHED"
    return run


def _fractions(metrics):
    return {key.removeprefix("train_phase_").removesuffix("_fraction"): value for key, value in metrics.items()
            if key.startswith("train_phase_") and key.endswith("_fraction")}


def _check_breakdown(metrics, phases):
    fractions = _fractions(metrics)
    assert set(fractions) == set(phases) and sum(fractions.values()) == pytest.approx(1.0, abs=0.02)
    per_step = {phase: metrics[f"train_phase_{phase}_seconds_per_step"] for phase in phases}
    for phase in phases:  # seconds per step and share of the window agree
        assert per_step[phase] / sum(per_step.values()) == pytest.approx(fractions[phase])
    spread = [metrics[f"train_step_seconds_{name}"] for name in ("p50", "p90", "p99", "max")]
    assert spread == sorted(spread) and spread[0] > 0 and metrics["train_step_stalls"] >= 0
    # the phase window (its own marks) against the throughput window (the throughput callback's clock)
    window = sum(per_step.values()) * metrics["train_measured_steps"]
    assert window == pytest.approx(metrics["train_steady_state_seconds"], rel=0.05)


def test_a_cpu_run_logs_its_breakdown_spread_achievable_rate_and_profile(cache_dir, sqlite_uri, tmp_path):
    done = mlflow_run({"max_steps": STEPS, "logging_steps": 2, "per_device_train_batch_size": 8,
                       "dataloader_num_workers": 0, "log_model": "false", "max_eval_samples": 8,
                       "throughput_warmup_steps": WARMUP, "profile_steps": "5-6"}, "Default")
    assert done.returncode == 0, done.stderr[-3000:]
    run = _run(sqlite_uri)
    metrics, tags, client = run.data.metrics, run.data.tags, MlflowClient(sqlite_uri)
    assert metrics["train_measured_steps"] == STEPS - WARMUP - 2  # the profiled steps are out of the window
    assert done.stdout.count("where a step went: ") == 1 and "(step p50 " in done.stdout
    assert f"\nadvice: {run.data.tags['advice']}\n" in done.stdout  # the lever, where the user reads the figures
    _check_breakdown(metrics, [p for p in PHASES if p != "all_reduce"])
    assert tags["phases.clock"] == "host clock (time.perf_counter)"
    assert tags["phases.merged"].startswith("nothing merged")
    assert tags["phases.note"].startswith("all_reduce: one device, no gradient all-reduce")
    assert tags["bottleneck"] in BOTTLENECKS and tags["advice"]
    series = client.get_metric_history(run.info.run_id, "step_phase_forward_fraction")
    assert [m.step for m in series] == [2, 4, 8, 10]  # each logging interval, the profiled one (5-6) left out
    assert all(0 < m.value < 1 for m in series)
    assert metrics["device_achievable_tflops"] > 0
    assert metrics["train_mfu_achievable"] == pytest.approx(
        metrics["train_model_tflops_per_second_per_device"] / metrics["device_achievable_tflops"])
    trace = client.download_artifacts(run.info.run_id, "profile/trace.json.gz", str(tmp_path))
    events = json.loads(gzip.decompress(open(trace, "rb").read()))["traceEvents"]
    assert sorted({e["name"] for e in events if e.get("name", "").startswith("train_step_")}) == [
        "train_step_5", "train_step_6"]
    table = json.loads(open(client.download_artifacts(run.info.run_id, "profile/top_ops.json", str(tmp_path))).read())
    assert table["columns"] == ["op", "calls", "self_cpu_ms", "cpu_total_ms"] and len(table["data"]) == 15
    ranked = [row[2] for row in table["data"]]
    assert ranked == sorted(ranked, reverse=True) and ranked[0] > 0


def test_two_ranks_log_a_non_zero_all_reduce_phase(cache_dir, sqlite_uri):
    done = run_cli(["train", "--devices", "2", "--max-steps", "8", "--logging-steps", "2",
                    "--per-device-train-batch-size", "8", "--dataloader-num-workers", "0", "--log-model", "false",
                    "--max-eval-samples", "8"])
    assert done.returncode == 0, done.stderr[-3000:]
    run = _run(sqlite_uri)
    metrics, tags = run.data.metrics, run.data.tags
    _check_breakdown(metrics, PHASES)
    assert metrics["train_phase_all_reduce_seconds_per_step"] > 0
    assert "all_reduce" not in tags["phases.note"]  # timed through DDP's comm hook
