"""The seed's Gaudi command on the software a Gaudi box runs: optimum-habana 1.21.2's real GaudiTrainer and
GaudiTrainingArguments on transformers 4.55, in optimum-habana's own CPU mode, over the on-disk fake of
Habana's PyTorch bridge (tests/fakes/habana_bridge: only what needs silicon is faked).

Runs in the Gaudi-stack environment (`make test-gaudi`); elsewhere optimum-habana is absent and it is skipped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import mlflow
import pandas as pd
import pytest

pytest.importorskip("optimum.habana", reason="the Gaudi stack (optimum-habana 1.21.2) runs in .venv-gaudi")

from bridgetower_mlflow.data.sample import default_sample_dir

from tests.conftest import BIN, REPO, run_cli
from tests.fakes import BRIDGE

pytestmark = [pytest.mark.slow, pytest.mark.gaudi_stack]

# The HPU-only settings, each switched off so that GaudiTrainer runs on the CPU; everything else is the recipe.
HPU_ONLY_OFF = (
    "--use_habana false --use_cpu true "  # optimum-habana's CPU mode; GaudiTrainer gates its fused AdamW and
    # fused clip-norm (the Gaudi config's use_fused_adam / use_fused_clip_norm) on use_habana
    "--use_lazy_mode false "  # lazy graphs exist only on an HPU
    "--use_hpu_graphs_for_inference false "  # HPU graphs
    "--torch_compile false"  # the eager recipe's torch.compile backend is hpu_backend
)
GAUDI_ENV = {"PYTHONPATH": str(BRIDGE), "FAKE_HPU_COUNT": "1", "HF_HUB_OFFLINE": "1"}


def _train_args(*options) -> list[str]:
    return ["train", "--accel", "gaudi2", "--per-device-train-batch-size", "8", "--logging-steps", "2",
            "--hf-args", HPU_ONLY_OFF, *options]


def _train(*options, timeout=900):
    return run_cli(_train_args(*options), env_extra=GAUDI_ENV, timeout=timeout)


def _runs(uri):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    return client, sorted(client.search_runs(["0"]), key=lambda r: r.info.start_time)


def _killed_after_checkpoint(tmp_path, args, step: int) -> None:
    """A first attempt, held at step `step` + 2 and SIGKILLed once checkpoint-`step` is complete."""
    hold = tmp_path / "hold"
    hold.write_text("")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **GAUDI_ENV,
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "fakes" / "slow_device"), str(BRIDGE)]),
           "BRIDGETOWER_TEST_STEP_S": "0.01", "BRIDGETOWER_TEST_HOLD_FILE": str(hold),
           "BRIDGETOWER_TEST_HOLD_AT": str(step + 2)}
    proc = subprocess.Popen([str(BIN / "bridgetower-mlflow"), *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 600
    while not list(tmp_path.glob(f"outputs/*/checkpoint-{step}/trainer_state.json")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_gaudi2_trains_resumes_and_logs_its_model_through_the_real_gaudi_trainer(tmp_path, sqlite_uri, cache_dir):
    options = ("--max-steps", "6", "--save-steps", "3", "--throughput-warmup-steps", "2", "--register-as", "bt-gaudi")
    _killed_after_checkpoint(tmp_path, _train_args(*options), step=3)
    done = _train(*options, "--resume", "true")
    assert done.returncode == 0, done.stderr[-3000:]
    client, (run,) = _runs(sqlite_uri)  # the killed attempt's run, resumed and finished
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    assert run.info.status == "FINISHED" and (tags["resumed"], tags["resumed.from_step"]) == ("true", "3")
    assert (tags["software.transformers"], tags["software.optimum_habana"]) == ("4.55.4", "1.21.2")
    assert (tags["accelerator"], tags["gaudi.path"], tags["software.synapseai"]) == ("gaudi2", "optimum-habana",
                                                                                     "1.24.0")
    # GaudiTrainingArguments' own fields and the Gaudi config the trainer got are params
    assert (params["use_habana"], params["use_lazy_mode"], params["throughput_warmup_steps"]) == ("False", "False",
                                                                                                 "2")
    assert params["adam_epsilon"] == "1e-06" and params["gaudi_config.use_fused_adam"] in ("True", "False")
    assert params["per_device_train_batch_size"] == "8" and params["max_steps"] == "6"
    # the project's throughput rule on the resumed attempt: steps 4-6, the first two left out as warmup
    assert metrics["train_measured_steps"] == 1 and metrics["train_samples_per_second"] > 0
    assert metrics["model_flops_per_sample"] > 0 and metrics["train_model_tflops_per_second"] > 0
    assert {"eval_loss", "eval_recall_at_1", "eval_recall_at_5", "train_loss"} <= set(metrics)
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [2, 4, 6]  # each step once
    version = client.get_model_version("bt-gaudi", "1")  # logged, registered, and it serves on this stack
    assert version.tags["run_id"] == run.info.run_id and version.tags["accelerator"] == "gaudi2"
    image = next((default_sample_dir() / "validation").glob("*.jpg"))
    frame = pd.DataFrame([{"image": str(image), "caption": "A cartoon of a sun.", "caption_choices": ["a", "b"]}])
    predicted = mlflow.pyfunc.load_model("models:/bt-gaudi/1").predict(frame)
    assert 0 <= predicted["best_choice"][0] < 2 and predicted["score"].between(-1, 1).all()


def test_a_zero_warmup_gaudi_run_still_has_its_throughput(tmp_path, sqlite_uri, cache_dir):
    """GaudiTrainingArguments' own default is throughput_warmup_steps=0."""
    done = _train("--max-steps", "3", "--throughput-warmup-steps", "0", "--log-model", "false")
    assert done.returncode == 0, done.stderr[-3000:]
    _, (run,) = _runs(sqlite_uri)
    assert run.data.metrics["train_measured_steps"] == 3 and run.data.metrics["train_samples_per_second"] > 0


def test_the_base_preset_trains_on_the_gaudi_stack(tmp_path, sqlite_uri, cache_dir):
    """`base` (768 wide, 12+12+6 layers, 288 px): the README's Gaudi sweep model; two small steps and one validation
    row (each row's caption matching runs the whole model on five image-caption pairs: 12 s of a core here)."""
    done = _train("--model", "base", "--max-steps", "2", "--throughput-warmup-steps", "1", "--max-seq-length", "16",
                  "--per-device-train-batch-size", "2", "--per-device-eval-batch-size", "1", "--max-train-samples",
                  "8", "--max-eval-samples", "1", "--dataloader-num-workers", "0", "--log-model", "false")
    assert done.returncode == 0, done.stderr[-3000:]
    _, (run,) = _runs(sqlite_uri)
    assert run.data.tags["model_preset"] == "base" and run.data.metrics["train_measured_steps"] == 1
    assert run.data.metrics["model_flops_per_sample"] > 1e11
    assert "eval_loss" in run.data.metrics and "eval_caption_match_accuracy" in run.data.metrics


def test_every_preset_builds_on_transformers_4_55(cache_dir):
    """The import that killed every preset on the Gaudi path (a 5.x-only image processor), and FLOPs counted.

    `large` (866M parameters) is built and counted here; a full CPU run of it takes minutes and 16 GB.
    """
    import transformers
    from PIL import Image

    from bridgetower_mlflow.model.load import PRESETS, load_model
    from bridgetower_mlflow.telemetry.flops import count_training_flops

    assert transformers.__version__.startswith("4.55.")
    for name in PRESETS:
        loaded = load_model(name, max_seq_length=32, seed=0)
        size = loaded.image.size
        processed = loaded.image_processor(images=[Image.new("RGB", (size * 2, size))], return_tensors="np")
        assert processed["pixel_values"].shape[:2] == (1, 3)
        assert count_training_flops(loaded.model.config, size, 32) > 0
