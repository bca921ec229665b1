"""The CPU image path: JPEG DCT-scaled decode, square crop, one uint8 antialiased resize, uint8 out.

Normalization happens once per batch on the accelerator (see data/collate.py), which keeps the
per-pixel float work out of the data-loader workers and moves 4x fewer bytes between processes.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class ImageSpec:
    """What the model's image tower takes: a size x size square, normalized with mean and std."""

    size: int
    mean: tuple = CLIP_MEAN
    std: tuple = CLIP_STD


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
    """Shorter edge to `size`, center crop `size`x`size`, bicubic with antialias; returns HWC uint8."""
    try:
        image = open_image(source)
        full_size = image.size
        if image.format == "JPEG":
            image.draft("RGB", (size, size))  # decode at the smallest DCT scale still >= size
        if image.mode != "RGB":
            image = image.convert("RGB")
        pixels = np.array(image)  # decodes; writable, so torch can share it
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise ImageDecodeError(f"image {describe_source(source)}: cannot decode ({exc})") from None
    return _square_resize(pixels, size, full_size)


def _square_resize(pixels: np.ndarray, size: int, full_size: tuple[int, int]) -> np.ndarray:
    """torchvision's Resize([size]) + CenterCrop(size) geometry, computed on the undrafted
    `full_size` (w, h), with torch's uint8 antialiased bicubic (~3x Pillow's resize here). An HWC
    array seen as NCHW is channels-last already, the layout of that SIMD kernel; the crop is a view.
    """
    import torch
    import torch.nn.functional as F

    width, height = full_size
    if height <= width:
        new_h, new_w = size, int(size * width / height)
    else:
        new_h, new_w = int(size * height / width), size
    image = torch.from_numpy(pixels).permute(2, 0, 1).unsqueeze(0)
    if (new_h, new_w) != tuple(pixels.shape[:2]):
        image = F.interpolate(image, size=(new_h, new_w), mode="bicubic", antialias=True, align_corners=False)
    top, left = round((new_h - size) / 2), round((new_w - size) / 2)
    return np.ascontiguousarray(image[0, :, top:top + size, left:left + size].permute(1, 2, 0).numpy())


def normalize_batch(pixels_uint8, mean=CLIP_MEAN, std=CLIP_STD, dtype=None):
    """(B,H,W,3) uint8 tensor -> contiguous (B,3,H,W) normalized float, on whatever device it lives."""
    import torch

    x = pixels_uint8.permute(0, 3, 1, 2).contiguous().to(dtype or torch.float32)
    scale = torch.tensor([1.0 / (255.0 * s) for s in std], device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    shift = torch.tensor([-m / s for m, s in zip(mean, std)], device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    return torch.addcmul(shift, x, scale, out=x)  # one fused pass: x * scale - mean / std
