"""Validation metrics: retrieval recall@1/@5 from the Trainer's predictions, caption matching."""

from __future__ import annotations

import logging

import numpy as np

from .scoring import recall_at_k, score_image_texts

LABELS = "ABCDE"
log = logging.getLogger(__name__)


def keep_embeddings(logits, labels=None):
    """preprocess_logits_for_metrics: keep [B, 2, D] (text, image) of BridgeTower's [B, 3, D] logits."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits[:, :2, :]


def retrieval_metrics_fn(captions: list[str]):
    """compute_metrics for Trainer.evaluate over the validation split, in dataset order."""

    def compute(prediction) -> dict:
        embeds = prediction.predictions
        embeds = embeds[0] if isinstance(embeds, tuple) else embeds
        count = embeds.shape[0]
        return recall_at_k(embeds[:, 1, :], embeds[:, 0, :], captions[:count])

    return compute


def caption_match_accuracy(model, tokenizer, dataset, rows: list[dict], image_column: str, image_size: int,
                           mean, std, max_length: int, device) -> float | None:
    """Share of validation cartoons whose labelled caption scores highest among `caption_choices`."""
    scored = [(i, r) for i, r in enumerate(rows) if r.get("caption_choices") and r.get("label") in tuple(LABELS)]
    if not scored:
        return None
    raw = dataset.with_format(None)
    correct = 0
    for index, row in scored:
        source = raw[index][image_column]
        scores = score_image_texts(model, tokenizer, source, list(row["caption_choices"]), image_size, mean, std,
                                   max_length, device)
        correct += int(np.argmax(scores)) == LABELS.index(row["label"])
    return correct / len(scored)
