"""Small and uneven splits: a batch the training split cannot fill is refused, so is no training at all, and
evaluation keeps every validation row on every accelerator (drop_last is for training only)."""

from __future__ import annotations

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.data.sample import generate_sample_set

from tests.conftest import run_cli

QUICK = ["--max-steps", "3", "--logging-steps", "1", "--throughput-warmup-steps", "1", "--log-model", "false",
         "--dataloader-num-workers", "0", "--per-device-train-batch-size", "8"]


def _runs(uri: str) -> list:
    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids) if ids else []


def _error_lines(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error: ")]


# by epochs on the Gaudi stack too (the floor's TrainingArguments); a step count is refused the same way there
@pytest.mark.parametrize("max_steps", ["5", pytest.param("-1", marks=pytest.mark.gaudi_stack)])
def test_a_batch_larger_than_the_training_split_is_refused_before_the_run(cache_dir, sqlite_uri, max_steps):
    done = run_cli(["train", "--per-device-train-batch-size", "300", "--max-steps", max_steps,
                    "--throughput-warmup-steps", "1", "--log-model", "false"])
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "error: per_device_train_batch_size: invalid value 300; allowed: at most 240 (the training split has "
        "240 rows)"], done.stderr[-2000:]
    assert _runs(sqlite_uri) == []  # refused before any run existed


@pytest.mark.gaudi_stack
def test_no_training_at_all_is_refused_before_a_run_exists(cache_dir, sqlite_uri):
    """0 epochs (once asked through hf_args, which ran no step and failed the run) is refused up front: epochs are
    --num-train-epochs' alone (a number > 0), and hf_args may not set them."""
    done = run_cli(["train", *QUICK, "--max-steps", "-1", "--hf-args", "--num_train_epochs 0"])
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "error: hf_args: invalid value '--num_train_epochs 0'; allowed: flags no train option owns (one owner per "
        "setting): use --num-train-epochs instead"], done.stderr[-2000:]
    assert _runs(sqlite_uri) == []


@pytest.mark.gaudi_stack
def test_four_validation_rows_log_eval_loss_and_the_recall_they_allow(cache_dir, sqlite_uri, tmp_path):
    folder = generate_sample_set(tmp_path / "small", {"train": 8, "validation": 4, "test": 1})
    done = run_cli(["train", *QUICK, "--dataset", str(folder)])  # evaluation batch 16 > 4 rows
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = _runs(sqlite_uri)
    assert run.info.status == "FINISHED"
    assert {"eval_loss", "eval_recall_at_1"} <= set(run.data.metrics)
    assert "eval_recall_at_5" not in run.data.metrics  # every row is in the top 5 of 4: not a measurement
    warnings = [line for line in done.stderr.splitlines() if "eval_recall_at_5" in line]
    assert len(warnings) == 1 and "4 rows" in warnings[0] and warnings[0].startswith("WARNING"), done.stderr[-3000:]


@pytest.mark.gaudi_stack
@pytest.mark.slow
def test_four_validation_rows_are_evaluated_by_the_real_gaudi_trainer(cache_dir, sqlite_uri, tmp_path):
    """GaudiTrainer builds its evaluation loader from the same flag (runs in the Gaudi-stack environment)."""
    pytest.importorskip("optimum.habana", reason="the Gaudi stack (optimum-habana 1.21.2) runs in .venv-gaudi")
    from tests.accelerators.test_gaudi_stack import GAUDI_ENV, HPU_ONLY_OFF

    folder = generate_sample_set(tmp_path / "small", {"train": 8, "validation": 4, "test": 1})
    done = run_cli(["train", *QUICK, "--accel", "gaudi2", "--dataset", str(folder), "--hf-args", HPU_ONLY_OFF],
                   env_extra=GAUDI_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = _runs(sqlite_uri)
    assert run.data.tags["gaudi.path"] == "optimum-habana"
    assert {"eval_loss", "eval_recall_at_1"} <= set(run.data.metrics)


def _row_ids(loader) -> list[int]:
    return [int(i) for batch in loader for i in batch["row"]]


class _Rows:
    """A map-style dataset of row numbers (what the loaders batch is all this test looks at)."""

    def __init__(self, count: int):
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> dict:
        return {"row": index}


def _collate(examples):
    import torch

    return {"row": torch.tensor([e["row"] for e in examples])}


@pytest.mark.gaudi_stack
def test_the_evaluation_loader_keeps_the_tail_of_an_uneven_split_and_training_drops_it(tmp_path):
    """The project's Trainer class, over the CPU recipe's arguments (dataloader_drop_last=True)."""
    import torch

    from bridgetower_mlflow.accelerators.base import DeviceInfo
    from bridgetower_mlflow.accelerators.registry import get_accelerator
    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.train.arguments import recipe_settings
    from bridgetower_mlflow.train.trainer import build_trainer_class

    config = build_train_config(output_dir=str(tmp_path), per_device_train_batch_size=8,
                                per_device_eval_batch_size=16, dataloader_num_workers=0)
    recipe = get_accelerator("cpu").recipe(DeviceInfo("cpu", "cpu", 1), recipe_settings(config, 1))
    args = recipe.build_arguments()
    assert args.dataloader_drop_last  # the study's rule for training
    trainer = build_trainer_class(recipe.trainer_class)(model=torch.nn.Linear(1, 1), args=args, data_collator=_collate,
                                                        train_dataset=_Rows(20), eval_dataset=_Rows(20))
    assert sorted(_row_ids(trainer.get_eval_dataloader())) == list(range(20))  # 16 + the 4 of the tail
    assert len(_row_ids(trainer.get_train_dataloader())) == 16  # full batches only
    assert trainer.args.dataloader_drop_last


@pytest.mark.gaudi_stack
def test_recall_is_computed_only_for_the_k_the_split_can_rank():
    from bridgetower_mlflow.train.evaluate import retrieval_metrics_fn

    class Prediction:
        predictions = np.eye(4, dtype=np.float32)[:, None, :].repeat(2, axis=1)  # [rows, (text, image), dim]

    assert retrieval_metrics_fn(["a", "b", "c", "d"])(Prediction()) == {"eval_recall_at_1": 1.0}
    Prediction.predictions = np.eye(5, dtype=np.float32)[:, None, :].repeat(2, axis=1)
    assert set(retrieval_metrics_fn(list("abcde"))(Prediction())) == {"eval_recall_at_1"}  # top 5 of 5: all hits
    Prediction.predictions = np.eye(6, dtype=np.float32)[:, None, :].repeat(2, axis=1)
    assert retrieval_metrics_fn(list("abcdef"))(Prediction()) == {"eval_recall_at_1": 1.0, "eval_recall_at_5": 1.0}
