"""Center crop + bicubic resize + normalize on decoded CHW uint8 tensors, on any torch device.

An image at least the model's size: the central square, resized to size x size, as the Habana pipeline
(CENTER_CROP + resize) does; within half a source pixel of the CPU path's resize-then-crop. A smaller one
(a thumbnail) is upscaled as the CPU path and the study's transform do: the shorter edge to the size, then
the central square. Its central square taken first would be shifted by up to half a source pixel, which
upscaled is many output pixels. Nothing here waits for the device: constants are made once, indices travel
as non-blocking copies.
"""

from __future__ import annotations

from ..cpu_images import resize_crop_geometry


def center_square(height: int, width: int) -> tuple[int, int, int]:
    """(top, left, side) of the central square, rounded like torchvision's center_crop."""
    side = min(height, width)
    return int(round((height - side) / 2.0)), int(round((width - side) / 2.0)), side


class DeviceImageOps:
    """crop_resize and normalize for one ImageSpec on one device, with the constants on the device.

    `pinned`: host tensors go to the device through page-locked memory (the caller's device copies from it
    asynchronously: CUDA)."""

    def __init__(self, image, device, pinned: bool = False):
        import torch

        self.size, self.device, self.pinned = image.size, torch.device(device), pinned
        scale = [1.0 / (255.0 * s) for s in image.std]
        shift = [m / s for m, s in zip(image.mean, image.std)]
        self.scale = self._to_device(torch.tensor(scale, dtype=torch.float32).view(1, 3, 1, 1))
        self.shift = self._to_device(torch.tensor(shift, dtype=torch.float32).view(1, 3, 1, 1))

    def _to_device(self, tensor):
        if self.pinned:
            tensor = tensor.pin_memory()
        return tensor.to(self.device, non_blocking=True)

    def crop_resize(self, images: list):
        """List of (3,H,W) uint8 tensors -> (B,3,size,size) float tensor of 0..255 (rounded like uint8)."""
        import torch

        groups = _group_by_shape(images)
        out = None if len(groups) == 1 else torch.empty((len(images), 3, self.size, self.size),
                                                        dtype=torch.float32, device=self.device)
        for (height, width), positions in groups.items():
            batch = self._resized(torch.stack([images[i] for i in positions]), height, width)
            if out is None:
                return batch
            out.index_copy_(0, self._to_device(torch.tensor(positions, dtype=torch.long)), batch)
        return out

    def _resized(self, batch, height: int, width: int):
        """(N,3,H,W) uint8 of one shape -> (N,3,size,size) float: cropped then resized, or a thumbnail upscaled."""
        import torch.nn.functional as F

        if min(height, width) >= self.size:
            top, left, side = center_square(height, width)
            batch, height, width = batch[:, :, top:top + side, left:left + side], side, side
        new_w, new_h, left, top = resize_crop_geometry(width, height, self.size)
        batch = batch.float()
        if (new_h, new_w) != tuple(batch.shape[-2:]):
            # the antialias kernel is PIL's bicubic (a=-0.5) both ways; the plain one uses a=-0.75
            batch = F.interpolate(batch, size=(new_h, new_w), mode="bicubic", align_corners=False, antialias=True)
        return batch[:, :, top:top + self.size, left:left + self.size].clamp(0, 255).round_()

    def normalize(self, pixels):
        """(B,3,H,W) float 0..255 -> (x/255 - mean) / std, in place."""
        return pixels.mul_(self.scale).sub_(self.shift)


def _group_by_shape(images: list) -> dict:
    groups: dict = {}
    for index, image in enumerate(images):
        groups.setdefault((int(image.shape[-2]), int(image.shape[-1])), []).append(index)
    return groups
