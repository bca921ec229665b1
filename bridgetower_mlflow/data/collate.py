"""Batch assembly: uint8 pixels + padded token ids; decode errors travel to the main process."""

from __future__ import annotations

import numpy as np

from .image_transform import ImageDecodeError, resize_center_crop


class ImageTransform:
    """datasets `with_transform` function: decodes each image to uint8 HWC in the worker."""

    def __init__(self, image_column: str, image_size: int):
        self.image_column, self.image_size = image_column, image_size

    def __call__(self, batch: dict) -> dict:
        pixels, errors = [], []
        for source in batch[self.image_column]:
            try:
                pixels.append(resize_center_crop(source, self.image_size))
            except ImageDecodeError as exc:
                pixels.append(None)
                errors.append(str(exc))
        out = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask")}
        out["pixels"] = pixels
        out["image_errors"] = [errors] * len(pixels)
        return out


def collate_batch(examples: list[dict]) -> dict:
    """Stack a batch; a batch with undecodable images becomes {'image_errors': [...]} only."""
    import torch

    errors = sorted({e for ex in examples for e in ex.get("image_errors", [])})
    if errors:
        return {"image_errors": errors}
    return {
        "pixel_values": torch.from_numpy(np.stack([ex["pixels"] for ex in examples])),
        "input_ids": torch.tensor([ex["input_ids"] for ex in examples], dtype=torch.long),
        "attention_mask": torch.tensor([ex["attention_mask"] for ex in examples], dtype=torch.long),
        "return_loss": True,
    }
