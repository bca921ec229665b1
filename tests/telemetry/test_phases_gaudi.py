"""The phase breakdown through optimum-habana 1.21.2's real GaudiTrainer (its CPU mode, over the on-disk fake of
Habana's bridge): GaudiTrainer's own training step and loop, with the project's trainer class on top, log the
breakdown and name what they merged. Runs in the Gaudi-stack environment (`make test-gaudi`)."""

from __future__ import annotations

import pytest

pytest.importorskip("optimum.habana", reason="the Gaudi stack (optimum-habana 1.21.2) runs in .venv-gaudi")

from mlflow.tracking import MlflowClient

from tests.conftest import run_cli
from tests.fakes import BRIDGE

pytestmark = [pytest.mark.slow, pytest.mark.gaudi_stack]
HPU_ONLY_OFF = ("--use_habana false --use_cpu true --use_lazy_mode false --use_hpu_graphs_for_inference false "
                "--torch_compile false")  # as tests/accelerators/test_gaudi_stack.py: GaudiTrainer on the CPU
GAUDI_ENV = {"PYTHONPATH": str(BRIDGE), "FAKE_HPU_COUNT": "1", "HF_HUB_OFFLINE": "1"}


def test_the_real_gaudi_trainer_logs_the_breakdown_and_names_what_merged(tmp_path, sqlite_uri, cache_dir):
    done = run_cli(["train", "--accel", "gaudi2", "--per-device-train-batch-size", "8", "--logging-steps", "2",
                    "--max-steps", "7", "--throughput-warmup-steps", "2", "--profile-steps", "4-4",
                    "--dataloader-num-workers", "0", "--log-model", "false", "--max-eval-samples", "8",
                    "--hf-args", HPU_ONLY_OFF], env_extra=GAUDI_ENV, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(sqlite_uri)
    (run,) = client.search_runs(["0"])
    metrics, tags = run.data.metrics, run.data.tags
    assert tags["software.optimum_habana"] == "1.21.2" and tags["gaudi.execution_mode"] == "eager"  # lazy off
    fractions = {k: v for k, v in metrics.items() if k.startswith("train_phase_") and k.endswith("_fraction")}
    assert {k.split("_", 2)[2].removesuffix("_fraction") for k in fractions} == {
        "data_wait", "host_to_device", "forward", "backward", "optimizer", "other"}
    assert sum(fractions.values()) == pytest.approx(1.0, abs=0.02)
    assert metrics["train_measured_steps"] == 7 - 2 - 1  # step 4 was profiled
    # GaudiTrainer trained on the CPU: no graph to cut, so nothing merged, and the tags say so and why
    assert tags["phases.clock"] == "host clock (time.perf_counter)"
    assert tags["phases.merged"].startswith("nothing merged: every phase boundary is marked")
    assert "the run trains on the CPU (use_habana false)" in tags["phases.note"]
    assert tags["bottleneck"] in ("input", "host", "communication", "compute")
    assert metrics["device_achievable_tflops"] > 0 and "train_mfu_achievable" in metrics
    assert [a.path for a in client.list_artifacts(run.info.run_id, "profile")] == ["profile/top_ops.json",
                                                                                   "profile/trace.json.gz"]
