"""Validation metrics: retrieval recall@1/@5 from the Trainer's predictions, caption matching."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import TrainConfig
    from .prepare import Prepared

import logging

import numpy as np

from ..contract import CAPTION_MATCH_METRIC, EVAL_METRICS
from ..model.scoring import Scorer, recall_at_k

LABELS = "ABCDE"
RECALL_KS = (1, 5)
log = logging.getLogger(__name__)


def keep_embeddings(logits: Any, labels: Any = None) -> Any:
    """preprocess_logits_for_metrics: keep [B, 2, D] (text, image) of BridgeTower's [B, 3, D] logits."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits[:, :2, :]


def retrieval_metrics_fn(captions: list[str]) -> Callable[[Any], dict[str, float]]:
    """compute_metrics for Trainer.evaluate over the validation split, in dataset order."""

    def compute(prediction: Any) -> dict[str, float]:
        embeds = prediction.predictions
        embeds = embeds[0] if isinstance(embeds, tuple) else embeds
        count = embeds.shape[0]
        return recall_at_k(embeds[:, 1, :], embeds[:, 0, :], captions[:count], RECALL_KS)

    return compute


def caption_match_accuracy(scorer: Scorer, dataset: Any, rows: list[dict[str, Any]], image_column: str) -> float | None:
    """Share of validation cartoons whose labelled caption scores highest among `caption_choices`."""
    scored = [(i, r) for i, r in enumerate(rows) if r.get("caption_choices") and r.get("label") in tuple(LABELS)]
    if not scored:
        return None
    raw = dataset.with_format(None)
    correct = 0
    for index, row in scored:
        scores = scorer.score(raw[index][image_column], list(row["caption_choices"]))
        correct += int(np.argmax(scores)) == LABELS.index(row["label"])
    return correct / len(scored)


def evaluate(trainer: Any, prepared: Prepared, config: TrainConfig, is_main: bool,
             done: dict[str, float] | None = None) -> dict[str, float]:
    """eval_loss and retrieval recall on every rank (Trainer gathers; `done`: the evaluation training ended with,
    not run again); caption matching on rank 0."""
    rows = len(prepared.data.validation)
    log.info("evaluating on %d validation rows", rows)
    if is_main:
        for k in (k for k in RECALL_KS if k >= rows):
            log.warning("eval_recall_at_%d not logged: the validation split has %d rows (recall@k needs more "
                        "than k, else every row is a hit; computed: %s)", k, rows,
                        ", ".join(f"eval_recall_at_{j}" for j in RECALL_KS if j < rows) or "none")
    metrics = {k: v for k, v in (done if done is not None else trainer.evaluate()).items() if k in EVAL_METRICS}
    if is_main:
        model = trainer.model
        model.eval()
        scorer = Scorer(model, prepared.loaded.tokenizer, prepared.loaded.image, config.max_seq_length,
                        trainer.args.device)
        accuracy = caption_match_accuracy(scorer, prepared.data.validation, prepared.data.validation_rows,
                                          prepared.data.image_column)
        if accuracy is not None:
            metrics[CAPTION_MATCH_METRIC] = accuracy
    return metrics
