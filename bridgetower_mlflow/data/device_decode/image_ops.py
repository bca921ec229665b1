"""Center crop + bicubic resize + normalize on decoded CHW uint8 tensors, on any torch device.

The CPU path (data/cpu_images.py) and the Habana pipeline (CENTER_CROP + resize) both take the
central square and resize it to size x size; this does the same on the device that holds the pixels.
Nothing here waits for the device: constants are made once, indices travel as non-blocking copies.
"""

from __future__ import annotations


def center_square(height: int, width: int) -> tuple[int, int, int]:
    """(top, left, side) of the central square, rounded like torchvision's center_crop."""
    side = min(height, width)
    return int(round((height - side) / 2.0)), int(round((width - side) / 2.0)), side


class DeviceImageOps:
    """crop_resize and normalize for one ImageSpec on one device, with the constants on the device."""

    def __init__(self, image, device):
        import torch

        self.size, self.device = image.size, torch.device(device)
        scale = [1.0 / (255.0 * s) for s in image.std]
        shift = [m / s for m, s in zip(image.mean, image.std)]
        self.scale = self._to_device(torch.tensor(scale, dtype=torch.float32).view(1, 3, 1, 1))
        self.shift = self._to_device(torch.tensor(shift, dtype=torch.float32).view(1, 3, 1, 1))

    def _to_device(self, tensor):
        if self.device.type == "cuda":
            tensor = tensor.pin_memory()
        return tensor.to(self.device, non_blocking=True)

    def crop_resize(self, images: list):
        """List of (3,H,W) uint8 tensors -> (B,3,size,size) float tensor of 0..255 (rounded like uint8)."""
        import torch
        import torch.nn.functional as F

        groups = _group_by_shape(images)
        out = None if len(groups) == 1 else torch.empty((len(images), 3, self.size, self.size),
                                                        dtype=torch.float32, device=self.device)
        for shape, positions in groups.items():
            top, left, side = center_square(shape[0], shape[1])
            batch = torch.stack([images[i][:, top:top + side, left:left + side] for i in positions]).float()
            if side != self.size:
                # the antialias kernel is PIL's bicubic (a=-0.5) both ways; the plain one uses a=-0.75
                batch = F.interpolate(batch, size=(self.size, self.size), mode="bicubic", align_corners=False,
                                      antialias=True)
            batch = batch.clamp_(0, 255).round_()
            if out is None:
                return batch
            out.index_copy_(0, self._to_device(torch.tensor(positions, dtype=torch.long)), batch)
        return out

    def normalize(self, pixels):
        """(B,3,H,W) float 0..255 -> (x/255 - mean) / std, in place."""
        return pixels.mul_(self.scale).sub_(self.shift)


def _group_by_shape(images: list) -> dict:
    groups: dict = {}
    for index, image in enumerate(images):
        groups.setdefault((int(image.shape[-2]), int(image.shape[-1])), []).append(index)
    return groups
