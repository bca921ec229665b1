"""Center crop + bicubic resize + normalize on decoded CHW uint8 tensors, on any torch device.

The CPU path (data/image_transform.py) and the Habana pipeline (CENTER_CROP + resize) both take the
central square and resize it to size x size; this does the same on the device that holds the pixels.
"""

from __future__ import annotations


def center_square(height: int, width: int) -> tuple[int, int, int]:
    """(top, left, side) of the central square, rounded like torchvision's center_crop."""
    side = min(height, width)
    return int(round((height - side) / 2.0)), int(round((width - side) / 2.0)), side


def crop_resize(images: list, size: int):
    """List of (3,H,W) uint8 tensors -> (B,3,size,size) float tensor of 0..255 (rounded like uint8)."""
    import torch
    import torch.nn.functional as F

    out = torch.empty((len(images), 3, size, size), dtype=torch.float32, device=images[0].device)
    for shape, positions in _group_by_shape(images).items():
        top, left, side = center_square(shape[0], shape[1])
        batch = torch.stack([images[i][:, top:top + side, left:left + side] for i in positions]).float()
        if side != size:
            # the antialias kernel is PIL's bicubic (a=-0.5) both ways; the plain one uses a=-0.75
            batch = F.interpolate(batch, size=(size, size), mode="bicubic", align_corners=False,
                                  antialias=True)
        out[positions] = batch.clamp_(0, 255).round_()
    return out


def normalize(pixels, mean, std):
    """(B,3,H,W) float 0..255 -> (x/255 - mean) / std, in place."""
    import torch

    scale = torch.tensor([1.0 / (255.0 * s) for s in std], dtype=pixels.dtype, device=pixels.device)
    shift = torch.tensor([m / s for m, s in zip(mean, std)], dtype=pixels.dtype, device=pixels.device)
    return pixels.mul_(scale.view(1, 3, 1, 1)).sub_(shift.view(1, 3, 1, 1))


def _group_by_shape(images: list) -> dict:
    groups: dict = {}
    for index, image in enumerate(images):
        groups.setdefault((int(image.shape[-2]), int(image.shape[-1])), []).append(index)
    return groups
