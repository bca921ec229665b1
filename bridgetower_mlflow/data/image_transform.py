"""The CPU image path: JPEG DCT-scaled decode, one fused resize+crop, uint8 out.

Normalization happens once per batch on the accelerator (see data/collate.py), which keeps the
per-pixel float work out of the data-loader workers and moves 4x fewer bytes between processes.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, UnidentifiedImageError

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class ImageDecodeError(Exception):
    """An image that cannot be decoded; the message names its file."""


def open_image(source) -> Image.Image:
    """Open a path, raw bytes, a datasets {'bytes','path'} dict or a PIL image (not yet decoded)."""
    if isinstance(source, Image.Image):
        return source
    if isinstance(source, dict):
        data, path = source.get("bytes"), source.get("path")
        return Image.open(io.BytesIO(data)) if data else Image.open(path)
    if isinstance(source, (bytes, bytearray)):
        return Image.open(io.BytesIO(source))
    return Image.open(source)


def describe_source(source) -> str:
    if isinstance(source, dict):
        return str(source.get("path") or "<in-memory image bytes>")
    if isinstance(source, (bytes, bytearray)):
        return "<in-memory image bytes>"
    return str(getattr(source, "filename", None) or source)


def resize_center_crop(source, size: int) -> np.ndarray:
    """Shorter edge to `size`, center crop `size`x`size`, bicubic; returns HWC uint8."""
    try:
        image = open_image(source)
        if image.format == "JPEG":
            image.draft("RGB", (size, size))  # decode at the smallest DCT scale still >= size
        image = image.convert("RGB")
        width, height = image.size
        side = min(width, height)
        left, top = (width - side) / 2, (height - side) / 2
        image = image.resize((size, size), Image.BICUBIC, box=(left, top, left + side, top + side))
        return np.asarray(image)
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise ImageDecodeError(f"image {describe_source(source)}: cannot decode ({exc})") from None


def normalize_batch(pixels_uint8, mean=CLIP_MEAN, std=CLIP_STD, dtype=None):
    """(B,H,W,3) uint8 tensor -> (B,3,H,W) normalized float, on whatever device it lives."""
    import torch

    x = pixels_uint8.permute(0, 3, 1, 2).to(dtype or torch.float32)
    scale = torch.tensor([1.0 / (255.0 * s) for s in std], device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    shift = torch.tensor([m / s for m, s in zip(mean, std)], device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    return x.mul_(scale).sub_(shift)
