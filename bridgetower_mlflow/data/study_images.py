"""The study's CPU image path (image_backend=study): optimum-habana's run_bridgetower.py transform, in torch.

What the example did when the study ran it (commit 1eef41c5, June 2023; HEAD 1d8504c6 is the same for
decoded images): the datasets Image feature hands a PIL image, decoded whole (no DCT draft); one band is
expanded to three (`to_grayscale(..., 3)`); `to_tensor` makes float32 CHW / 255; then, one image at a time,
`Resize([size], BICUBIC)` (shorter edge), `CenterCrop(size)`, `ConvertImageDtype(float)` (a no-op on float)
and `Normalize(mean, std)`, all torchvision tensor ops, in the worker. Its comment says the transform is
jit-scripted; the code never calls torch.jit.script, so neither does this. torchvision is not imported:
its ops are rewritten below with the same arithmetic. Workers ship normalized float32 CHW (4x the bytes
of the fast path's uint8), as the study's did; the trainer skips its normalize for float pixel_values.

Antialias: False. On tensors, torchvision's Resize defaulted to antialias=None = False before 0.17; the
study's stacks (Optimum Habana 1.6/1.7 on SynapseAI 1.10/1.11 = PyTorch 2.0.1 + torchvision 0.15; the
GPU runs' 2023 NVIDIA containers, torchvision 0.15/0.16) all resized without it. torchvision >= 0.17
would antialias: set STUDY_ANTIALIAS to reproduce that instead.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, UnidentifiedImageError

from .cpu_images import ImageDecodeError, ImageSpec, ImageTransform, describe_source, open_image, refuse_missing

STUDY_ANTIALIAS = False


def study_pixels(source, image: ImageSpec) -> np.ndarray:
    """One image through the study's transform: (3, size, size) normalized float32, C-contiguous."""
    import torch

    with torch.no_grad():
        x = center_crop(resize_shorter_edge(to_tensor(decode_like_study(source)), image.size), image.size)
        # a 1-pixel source upscales to a broadcast view whose clone keeps its strides: copy it into place
        return np.ascontiguousarray(normalize(x, image.mean, image.std).numpy())


def decode_like_study(source) -> Image.Image:
    """Full Pillow decode; one band to three gray ones, like the example (other modes: RGB, so 3 channels)."""
    refuse_missing(source)
    try:
        pil = open_image(source)
        pil.load()
        if len(pil.getbands()) == 1:
            return pil.convert("L").convert("RGB")  # to_grayscale(num_output_channels=3)
        return pil if pil.mode == "RGB" else pil.convert("RGB")
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise ImageDecodeError(f"image {describe_source(source)}: cannot decode ({exc})") from None


def to_tensor(pil: Image.Image):
    """torchvision's to_tensor on an RGB image: CHW in the default float dtype, uint8 / 255."""
    import torch

    pixels = torch.from_numpy(np.array(pil, np.uint8, copy=True)).view(pil.size[1], pil.size[0], 3)
    return pixels.permute(2, 0, 1).contiguous().to(dtype=torch.get_default_dtype()).div(255)


def resized_size(height: int, width: int, size: int) -> tuple[int, int]:
    """torchvision's _compute_resized_output_size for Resize([size]): the shorter edge to size, (h, w)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = size, int(size * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def resize_shorter_edge(x, size: int):
    """torchvision's tensor Resize([size], BICUBIC): float interpolate, align_corners=False, no clamp."""
    import torch.nn.functional as F

    out = resized_size(x.shape[-2], x.shape[-1], size)
    if out == tuple(x.shape[-2:]):
        return x
    return F.interpolate(x.unsqueeze(0), size=list(out), mode="bicubic", align_corners=False,
                         antialias=STUDY_ANTIALIAS).squeeze(0)


def center_crop(x, size: int):
    """torchvision's center_crop once the shorter edge is `size` (no padding case): a view."""
    height, width = x.shape[-2:]
    top, left = int(round((height - size) / 2.0)), int(round((width - size) / 2.0))
    return x[..., top:top + size, left:left + size]


def normalize(x, mean, std):
    """torchvision's Normalize (not in place): a clone, then sub_(mean) and div_(std) per channel."""
    import torch

    mean_t = torch.as_tensor(mean, dtype=x.dtype).view(-1, 1, 1)
    std_t = torch.as_tensor(std, dtype=x.dtype).view(-1, 1, 1)
    return x.clone().sub_(mean_t).div_(std_t)


class StudyImageTransform(ImageTransform):
    """datasets `with_transform` function: each image through the study's transform in the worker."""

    def __init__(self, image_column: str, image: ImageSpec):
        super().__init__(image_column, image.size)
        self.image = image

    def pixels(self, source) -> np.ndarray:
        return study_pixels(source, self.image)
