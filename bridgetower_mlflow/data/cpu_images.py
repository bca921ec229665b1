"""The CPU image path: JPEG DCT-scaled decode, shorter edge to the model size, center crop, uint8 out.

JPEGs decode with OpenCV (libjpeg-turbo's scaled IDCT straight into RGB), then a 3x3 Gaussian standing
in for antialiasing and OpenCV's cubic resize. Other formats, JPEGs OpenCV cannot read, and machines
without opencv-python-headless take Pillow's draft decode + torch's uint8 antialiased bicubic. Workers
ship uint8; normalize_batch runs once per batch in the trainer, on the device (CPU: OpenCV's SIMD).
"""

from __future__ import annotations

import functools
import io
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..environment import image_library

if TYPE_CHECKING:
    import torch

try:
    import cv2
except ImportError:  # the Pillow + torch path below serves every source
    cv2 = None  # type: ignore[assignment]  # absent: BACKEND is "pillow" and no cv2 call runs

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

# What decodes JPEGs (other formats: always Pillow): OpenCV >= 5 (its RGB + reduced decode flags, tested
# on 5.0) unless BRIDGETOWER_IMAGE_BACKEND=pillow forces the fallback
BACKEND = "opencv" if (cv2 and int(cv2.__version__.split(".")[0]) >= 5
                       and image_library() == "opencv") else "pillow"

if BACKEND == "opencv":
    cv2.setNumThreads(1)  # one image is too small to split; threads would oversubscribe loader workers
    # IMREAD_REDUCED_GRAYSCALE_n's scale bits with RGB output; EXIF orientation ignored, like Pillow
    _CV2_FLAGS = {f: bits | cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION
                  for f, bits in ((1, 0), (2, 16), (4, 32), (8, 64))}
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_BLUR, _BLUR_FROM = 0.55, 1.25  # sigma per sqrt(shrink^2 - 1), and from which shrink: fitted on the sample drawings


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
        # a dict with neither is refused before this (refuse_missing), so path is a str here
        return Image.open(io.BytesIO(data)) if data else Image.open(path)  # type: ignore[arg-type]
    if isinstance(source, (bytes, bytearray)):
        return Image.open(io.BytesIO(source))
    return Image.open(source)


def refuse_missing(source) -> None:
    """datasets' Image feature holds None, or {'bytes': None, 'path': None}, for a row without an image."""
    if source is None or (isinstance(source, dict) and not source.get("bytes") and not source.get("path")):
        raise ImageDecodeError("image missing: the row has no image (neither bytes nor a path)")


def describe_source(source) -> str:
    if isinstance(source, dict):
        return str(source.get("path") or "<in-memory image bytes>")
    if isinstance(source, (bytes, bytearray)):
        return "<in-memory image bytes>"
    return str(getattr(source, "filename", None) or source)


def cpu_loader_name(image_backend: str = "fast") -> str:
    """The data_loader tag's value for CPU decoding: OpenCV's fast path, the Pillow fallback, or the study's."""
    from .. import contract  # here, not at the top: a served model ships this module without contract.py

    if image_backend == "study":
        return contract.CPU_STUDY_LOADER
    return contract.CPU_LOADER if BACKEND == "opencv" else contract.CPU_PILLOW_LOADER


def resize_center_crop(source, size: int) -> np.ndarray:
    """Shorter edge to `size`, center crop `size`x`size`, bicubic with antialias; returns HWC uint8."""
    refuse_missing(source)
    try:
        data = _encoded(source) if BACKEND == "opencv" else None
        pixels = _opencv_jpeg(data, size) if data is not None else None
        if pixels is not None:
            return pixels
        image = open_image(source if data is None else io.BytesIO(data))
        full_size = image.size
        if image.format == "JPEG":
            image.draft("RGB", (size, size))  # decode at the smallest DCT scale still >= size
        if image.mode != "RGB":
            image = image.convert("RGB")
        pixels = np.array(image)  # decodes; writable, so torch can share it
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise ImageDecodeError(f"image {describe_source(source)}: cannot decode ({exc})") from None
    return _square_resize(pixels, size, full_size)


def _encoded(source):
    """The encoded bytes of a path, bytes, file object or datasets dict; None for a PIL image."""
    if isinstance(source, dict):
        source = source.get("bytes") or source.get("path")
    if isinstance(source, (bytes, bytearray, Image.Image)):
        return None if isinstance(source, Image.Image) else source
    if hasattr(source, "read"):
        return source.read()
    with open(source, "rb") as fh:
        return fh.read()


def _jpeg_size(data) -> tuple[int, int] | None:
    """(width, height) of an 8-bit gray or YCbCr JPEG; None for anything left to Pillow (CMYK too)."""
    if data[:2] != b"\xff\xd8":
        return None
    pos, end = 2, len(data) - 10
    try:
        while pos < end:
            if data[pos] != 0xFF:
                return None
            marker = data[pos + 1]
            if marker == 0xFF:
                pos += 1
            elif marker in _SOF:
                bits, height, width, components = struct.unpack_from(">BHHB", data, pos + 4)
                return (width, height) if bits == 8 and components in (1, 3) and width and height else None
            else:
                pos += 2 + struct.unpack_from(">H", data, pos + 2)[0]
    except struct.error:
        return None
    return None


def resize_crop_geometry(width: int, height: int, size: int) -> tuple[int, int, int, int]:
    """torchvision's Resize([size]) + CenterCrop(size) on the full size: new_w, new_h, left, top.

    An image smaller than `size` is upscaled (its shorter edge to `size`), as the study's transform does."""
    new_h, new_w = (size, int(size * width / height)) if height <= width else (int(size * height / width), size)
    return new_w, new_h, round((new_w - size) / 2), round((new_h - size) / 2)


def _opencv_jpeg(data, size: int) -> np.ndarray | None:
    """The OpenCV path; None when Pillow should decode (not a JPEG, or one OpenCV rejects)."""
    full = _jpeg_size(data)
    if full is None:
        return None
    scale = min(full[0] // size, full[1] // size)  # 0 for an image smaller than the model's input: upscaled
    factor = next((f for f in (8, 4, 2) if scale >= f), 1)  # Pillow's draft rule, so geometry matches
    try:
        pixels = cv2.imdecode(np.frombuffer(data, np.uint8), _CV2_FLAGS[factor])
    except cv2.error:  # like None below: Pillow decodes it or says what is wrong
        return None
    if pixels is None or pixels.shape[:2] != (-(-full[1] // factor), -(-full[0] // factor)):
        return None  # truncated or corrupt, or another size: a header misread above, a wrong geometry
    new_w, new_h, left, top = resize_crop_geometry(*full, size)
    shrink = pixels.shape[0] / new_h
    if shrink > _BLUR_FROM:
        # cv2's cubic does not widen its kernel when shrinking (no antialias); the blur halves the error
        # that leaves against Pillow's antialiased bicubic, at ~0.6 ms for both against torch's ~1 ms.
        pixels = cv2.GaussianBlur(pixels, (3, 3), _BLUR * math.sqrt(shrink * shrink - 1))
    if (new_h, new_w) != pixels.shape[:2]:
        pixels = cv2.resize(pixels, (new_w, new_h), interpolation=cv2.INTER_CUBIC)
    return np.ascontiguousarray(pixels[top:top + size, left:left + size])


def _square_resize(pixels: np.ndarray, size: int, full_size: tuple[int, int]) -> np.ndarray:
    """The Pillow path's resize: `resize_crop_geometry` on the undrafted `full_size` (w, h), torch's uint8 antialiased
    bicubic (Pillow's kernel, ~3x its speed) on the HWC array seen as channels-last NCHW; the crop is a view."""
    import torch
    import torch.nn.functional as F

    new_w, new_h, left, top = resize_crop_geometry(*full_size, size)
    image = torch.from_numpy(pixels).permute(2, 0, 1).unsqueeze(0)
    if (new_h, new_w) != tuple(pixels.shape[:2]):
        image = F.interpolate(image, size=(new_h, new_w), mode="bicubic", antialias=True, align_corners=False)
    return np.ascontiguousarray(image[0, :, top:top + size, left:left + size].permute(1, 2, 0).numpy())


def normalize_batch(pixels_uint8: torch.Tensor, mean: Sequence[float] = CLIP_MEAN, std: Sequence[float] = CLIP_STD,
                    dtype: torch.dtype | None = None) -> torch.Tensor:
    """(B,H,W,3) uint8 tensor -> contiguous (B,3,H,W) normalized float, on whatever device it lives."""
    import torch

    scale = tuple(1.0 / (255.0 * s) for s in std)
    shift = tuple(-m / s for m, s in zip(mean, std))
    if pixels_uint8.device.type == "cpu" and BACKEND == "opencv" and dtype in (None, torch.float32):
        return torch.from_numpy(_normalize_opencv(pixels_uint8.numpy(), scale, shift))
    # one fused pass per batch; on a device, a kernel per plane would cost launches
    x = pixels_uint8.permute(0, 3, 1, 2).contiguous().to(dtype or torch.float32)
    scale_t, shift_t = _on_device(scale, shift, x.device, x.dtype)
    return torch.addcmul(shift_t, x, scale_t, out=x)


@functools.lru_cache(maxsize=64)
def _on_device(scale: tuple, shift: tuple, device, dtype) -> tuple:
    """(1,3,1,1) constants made once per device and dtype: made per step, each is a blocking host-to-device copy."""
    import torch

    return tuple(torch.tensor(values, device=device, dtype=dtype).view(1, 3, 1, 1) for values in (scale, shift))


def _normalize_opencv(pixels: np.ndarray, scale: tuple, shift: tuple) -> np.ndarray:
    """The CPU batch normalize: per image, split the uint8 planes (cheap: 1 byte a value), then one
    SIMD convert-scale-shift per plane straight into the float output (about half torch's time here)."""
    b, h, w, c = pixels.shape
    out = np.empty((b, c, h, w), np.float32)
    for i in range(b):
        for ch, plane in enumerate(cv2.split(np.ascontiguousarray(pixels[i]))):
            cv2.addWeighted(plane, scale[ch], plane, 0.0, shift[ch], dst=out[i, ch], dtype=cv2.CV_32F)
    return out


class ImageTransform:
    """datasets `with_transform` function: decodes each image to uint8 HWC in the worker."""

    def __init__(self, image_column: str, image_size: int):
        self.image_column, self.image_size = image_column, image_size

    def pixels(self, source) -> np.ndarray:
        """One image as the worker ships it (a subclass may ship another transform's pixels)."""
        return resize_center_crop(source, self.image_size)

    def __call__(self, batch: dict) -> dict:
        pixels: list[np.ndarray | None] = []
        errors: list[str] = []
        for source in batch[self.image_column]:
            try:
                pixels.append(self.pixels(source))
            except ImageDecodeError as exc:
                pixels.append(None)
                errors.append(str(exc))
            except StopIteration:  # out of here, a DataLoader takes it for the end of the data: the epoch ends
                pixels.append(None)
                errors.append(f"image {describe_source(source)}: cannot decode (StopIteration in the decoder)")
        out = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask")}
        out["pixels"] = pixels
        out["image_errors"] = [errors] * len(pixels)
        return out
