"""register_as with register_checkpoint=best: the evaluated checkpoint best by the target's metric, not the last
model. The rule over a run's evaluations, and the registration of an earlier checkpoint's weights (a servable model
of their own, at the checkpoint's step) through the product's publish on a real sqlite store.

Which evaluation of a real training run is best is not something a test can fix in seconds (the trajectory of a
few steps moves with thread timing), so the registration is driven through publish_model with a real Trainer whose
final weights differ from its checkpoint's."""

from __future__ import annotations

import math

import pytest
import torch

from bridgetower_mlflow.model.publish import BestCheckpoint, publish_model
from bridgetower_mlflow.target import parse_target
from bridgetower_mlflow.train.quality import Evaluation, best_evaluated

pytestmark = pytest.mark.slow
LOSS = parse_target("eval_loss<=1.0")


def _evaluation(step: int, loss: float, checkpoint: bool = True) -> Evaluation:
    return Evaluation(step, {"eval_loss": loss}, checkpoint=checkpoint)


@pytest.mark.parametrize(("evaluations", "kept", "last", "best"), [
    ([_evaluation(2, 2.0), _evaluation(4, 1.5), _evaluation(6, 1.8)], {2, 4, 6}, 6, 4),  # an earlier checkpoint
    ([_evaluation(2, 2.0), _evaluation(4, 1.5), _evaluation(6, 1.5)], {2, 4, 6}, 6, 6),  # a tie: the later one
    ([_evaluation(2, 2.0), _evaluation(4, 1.5), _evaluation(6, 1.8)], {2, 6}, 6, 6),  # 4's folder is gone
    ([_evaluation(2, 1.0, checkpoint=False), _evaluation(4, 1.5)], {4}, 4, 4),  # no checkpoint at step 2
    ([_evaluation(2, 1.5), _evaluation(4, math.nan)], {2, 4}, 4, 2),  # a loss that diverged is no best
])
def test_the_best_is_the_kept_checkpoint_or_final_model_best_by_the_target(evaluations, kept, last, best):
    assert best_evaluated(tuple(evaluations), LOSS, last, kept.__contains__).step == best


def test_higher_is_better_for_recall():
    recall = parse_target("recall_at_5>=0.3")
    evaluations = (Evaluation(2, {"eval_recall_at_5": 0.2}, checkpoint=True),
                   Evaluation(4, {"eval_recall_at_5": 0.25}, checkpoint=True), Evaluation(6, {"eval_recall_at_5": 0.1}))
    assert best_evaluated(evaluations, recall, 6, {2, 4}.__contains__).step == 4


def test_an_earlier_checkpoint_is_registered_with_its_own_weights_and_step(cache_dir, sqlite_uri, tmp_path):
    import mlflow
    from mlflow.tracking import MlflowClient
    from transformers import BridgeTowerForContrastiveLearning

    from bridgetower_mlflow.accelerators.registry import get_accelerator
    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.launch.ranks import RankInfo
    from bridgetower_mlflow.telemetry.sinks import NullSink
    from bridgetower_mlflow.tracking.session import RunSession
    from bridgetower_mlflow.train.prepare import prepare
    from bridgetower_mlflow.train.trainer import build_trainer

    config = build_train_config(target="eval_loss<=1", register_as="best-test", max_seq_length=32, max_steps=6,
                                output_dir=str(tmp_path / "outputs"))
    adapter = get_accelerator("cpu")
    prepared = prepare(config, adapter, adapter.detect(1, 1), RankInfo(0, 0, 1))
    trainer, _ = build_trainer(config, prepared, NullSink())
    checkpoint = tmp_path / "outputs" / "checkpoint-3"
    trainer.model.save_pretrained(checkpoint)  # the Trainer's checkpoint format: config and safetensors
    saved = trainer.model.itc_text_head.fc.weight.detach().clone()
    with torch.no_grad():
        trainer.model.itc_text_head.fc.weight.add_(1.0)  # training went on past it: the final weights differ
    trainer.state.global_step = 6

    session = RunSession.start("best", "best run", {})
    version = publish_model(config, prepared, session, trainer, {"train_samples_per_second": 12.5, "eval_loss": 1.4},
                            BestCheckpoint(3, checkpoint, {"eval_loss": 0.9}))
    session.finish("FINISHED", 30)

    client = MlflowClient(sqlite_uri)
    registered = client.get_model_version("best-test", version)
    assert (registered.tags["checkpoint.step"], registered.tags["eval_loss"]) == ("3", "0.9")
    assert registered.tags["train_samples_per_second"] == "12.5" and "step 3" in registered.description
    run = client.get_run(session.run_id)
    assert run.data.tags["model_uri"] != registered.source  # the run's model is still the final one
    folder = mlflow.artifacts.download_artifacts(f"models:/best-test/{version}", dst_path=str(tmp_path / "got"))
    served = BridgeTowerForContrastiveLearning.from_pretrained(f"{folder}/artifacts/best-model")
    assert torch.equal(served.itc_text_head.fc.weight, saved)
    outputs = {o.model_id: o.step for o in client.get_run(session.run_id).outputs.model_outputs}
    assert sorted(outputs.values()) == [3, 6]  # the final model at its step, the registered one at the checkpoint's
