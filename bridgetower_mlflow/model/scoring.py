"""Image-caption scores in BridgeTower's contrastive space (shared by evaluation and the served model).

Imports only numpy, torch and the CPU image path: a logged model carries this module to serve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..data.cpu_images import ImageSpec, normalize_batch, resize_center_crop

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase


def embed_pairs(model, pixel_values, input_ids, attention_mask):
    """(image_embeds, text_embeds), both L2-normalized, for aligned image/text pairs."""
    import torch

    with torch.no_grad():
        out = model(pixel_values=pixel_values, input_ids=input_ids, attention_mask=attention_mask)
    return out.image_embeds, out.text_embeds


@dataclass(frozen=True)
class Scorer:
    """A model with its tokenizer and image spec: scores one image against texts."""

    model: object
    tokenizer: PreTrainedTokenizerBase
    image: ImageSpec
    max_length: int
    device: str | torch.device = "cpu"

    def score(self, image_source, texts: list[str]) -> np.ndarray:
        """Cosine similarity of one image with each text (the text and image towers are independent)."""
        import torch

        pixels = torch.from_numpy(np.array(resize_center_crop(image_source, self.image.size)))
        pixel_values = normalize_batch(pixels.unsqueeze(0).to(self.device), self.image.mean, self.image.std)
        tokens = self.tokenizer(texts, padding="max_length", truncation=True, max_length=self.max_length,
                                return_tensors="pt")
        image_embeds, text_embeds = embed_pairs(self.model, pixel_values.expand(len(texts), -1, -1, -1),
                                                tokens["input_ids"].to(self.device),
                                                tokens["attention_mask"].to(self.device))
        return (image_embeds * text_embeds).sum(-1).float().cpu().numpy()


def recall_at_k(image_embeds: np.ndarray, text_embeds: np.ndarray, texts: list[str], ks=(1, 5)) -> dict:
    """Image-to-text retrieval: a hit when a text identical to the image's own is in the top k.

    Only for each k below the row count: from k = rows on, every image is a hit whatever the model.
    """
    similarity = image_embeds @ text_embeds.T
    order = np.argsort(-similarity, axis=1)
    results = {}
    for k in (k for k in ks if k < len(texts)):
        hits = [texts[i] in {texts[j] for j in order[i, :k]} for i in range(len(texts))]
        results[f"eval_recall_at_{k}"] = float(np.mean(hits))
    return results
