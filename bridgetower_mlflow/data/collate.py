"""Batch assembly: uint8 pixels + padded token ids; decode errors travel to the main process.

The per-row decode (ImageTransform) lives with the CPU image path it runs, in cpu_images.py.
"""

from __future__ import annotations

import numpy as np


def collate_batch(examples: list[dict]) -> dict:
    """Stack a batch; a batch with undecodable images becomes {'image_errors': [...]} only."""
    errors = sorted({e for ex in examples for e in ex.get("image_errors", [])})
    if errors:
        return {"image_errors": errors}
    try:
        return _stack(examples)
    except StopIteration:  # out of here, a DataLoader takes it for the end of the data: the epoch would end
        return {"image_errors": [f"a batch of {len(examples)} images could not be assembled (StopIteration)"]}


def _stack(examples: list[dict]) -> dict:
    import torch

    return {
        "pixel_values": torch.from_numpy(np.stack([ex["pixels"] for ex in examples])),
        "input_ids": torch.tensor([ex["input_ids"] for ex in examples], dtype=torch.long),
        "attention_mask": torch.tensor([ex["attention_mask"] for ex in examples], dtype=torch.long),
        "return_loss": True,
    }
