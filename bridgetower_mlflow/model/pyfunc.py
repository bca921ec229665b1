"""The registered model: a pyfunc that scores image/caption pairs on CPU.

Input frame columns: `image` (file path, raw bytes or base64 text), `caption` (optional) and
`caption_choices` (optional list; in a CSV body a JSON list such as `["a", "b"]`). Output: `score`
(cosine of image and caption) and `best_choice` (index of the best-scoring choice, -1 without
choices) plus `choice_scores`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os

from mlflow.pyfunc import PythonModel

from ..data.cpu_images import ImageSpec
from .checkpoint import INFERENCE_FILE
from .scoring import Scorer


def decode_image_cell(cell):
    """A path stays a path; base64 text becomes bytes; bytes stay bytes."""
    if isinstance(cell, (bytes, bytearray)):
        return bytes(cell)
    text = str(cell)
    if os.path.exists(text):
        return text
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"image: {text[:80]!r} is neither an existing file nor base64 image bytes") from None


def choices_list(cell) -> list[str]:
    """caption_choices as a list: None/NaN/empty -> [], a JSON list in a string (CSV input) -> its items."""
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return []
    if isinstance(cell, str):
        try:
            parsed = json.loads(cell)
        except ValueError:
            return [cell] if cell else []
        return [str(item) for item in parsed] if isinstance(parsed, list) else [cell]
    return [str(item) for item in cell]


class BridgeTowerPyfunc(PythonModel):
    def load_context(self, context):
        import torch
        from transformers import AutoTokenizer, BridgeTowerForContrastiveLearning

        folder = context.artifacts["checkpoint"]
        with open(os.path.join(folder, INFERENCE_FILE), encoding="utf-8") as handle:
            self.settings = json.load(handle)
        # fp32 whatever the checkpoint holds; .float() since the keyword differs (4.55 torch_dtype, 5.x dtype)
        model = BridgeTowerForContrastiveLearning.from_pretrained(folder).to(torch.float32).eval()
        image = ImageSpec(self.settings["image_size"], tuple(self.settings["image_mean"]),
                          tuple(self.settings["image_std"]))
        self.scorer = Scorer(model, AutoTokenizer.from_pretrained(folder), image, self.settings["max_seq_length"])

    def predict(self, context, model_input, params=None):
        import numpy as np
        import pandas as pd

        rows = []
        for _, row in model_input.iterrows():
            caption = row.get("caption") if "caption" in model_input.columns else None
            choices = choices_list(row.get("caption_choices") if "caption_choices" in model_input.columns else None)
            has_caption = isinstance(caption, str) and caption != ""
            texts = ([caption] if has_caption else []) + choices
            if not texts:
                raise ValueError("caption: each row needs a caption or caption_choices")
            scores = self.scorer.score(decode_image_cell(row["image"]), texts)
            choice_scores = scores[1:] if has_caption else scores
            rows.append({
                "score": float(scores[0]) if has_caption else float("nan"),
                "best_choice": int(np.argmax(choice_scores)) if choices else -1,
                "choice_scores": [float(s) for s in choice_scores] if choices else [],
            })
        return pd.DataFrame(rows)
