"""Raw image access for the on-device loaders: the undecoded column, file paths, encoded bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import DataError, DeviceDecodeUnavailable

JPEG_MAGIC = b"\xff\xd8\xff"


def plain_dataset(dataset):
    """The dataset without a CPU decode transform (device loaders want the raw column)."""
    return dataset.with_format(None) if hasattr(dataset, "with_format") else dataset


def find_image_column(dataset) -> str:
    """The column holding images: a datasets Image feature, else `image_path`, else `image`."""
    import datasets

    features = getattr(dataset, "features", None) or {}
    for name, feature in features.items():
        if isinstance(feature, datasets.Image):
            return name
    names = list(getattr(dataset, "column_names", features))
    for name in ("image_path", "image"):
        if name in names:
            return name
    raise DeviceDecodeUnavailable(f"no image column found; columns are {', '.join(names) or 'none'}")


def source_path(value) -> str | None:
    """The local file behind a {'bytes','path'} dict or a path string (None for bytes only)."""
    path = value.get("path") if isinstance(value, dict) else value
    return str(path) if isinstance(path, (str, Path)) and Path(path).is_file() else None


def read_bytes(value) -> bytes:
    """Encoded image bytes from a {'bytes','path'} dict, raw bytes or a path."""
    if isinstance(value, dict) and value.get("bytes"):
        return bytes(value["bytes"])
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    path = value.get("path") if isinstance(value, dict) else value
    try:
        return Path(path).read_bytes()  # type: ignore[arg-type]  # None (no bytes, no path): TypeError below
    except (OSError, TypeError) as exc:
        raise DataError(f"image {path}: cannot read ({exc})") from None


def require_jpeg(data: bytes, where: str, decoder: str) -> None:
    if not data.startswith(JPEG_MAGIC):
        raise DeviceDecodeUnavailable(f"{decoder} decodes JPEG only, and {where} is not a JPEG")


def device_decodable(data: bytes) -> bool:
    """True for a JPEG with 1 or 3 components (nvJPEG and the media pipe decode those; not CMYK, not PNG).

    Reads the header only (Pillow opens lazily); an unreadable header is left to the decoder to report.
    """
    import io

    from PIL import Image, UnidentifiedImageError

    if not data.startswith(JPEG_MAGIC):
        return False
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.mode in ("RGB", "L")
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError):
        return True


class JpegBytesCollate:
    """Worker-side collate: encoded bytes as uint8 tensors, whether the device can decode each, the text."""

    def __init__(self, image_column: str):
        self.image_column = image_column

    def __call__(self, items: list[dict]) -> dict:
        import torch

        jpegs, sources, on_device = [], [], []
        for item in items:
            value = item[self.image_column]
            source = value.get("path") if isinstance(value, dict) else str(value)
            try:
                data = read_bytes(value)
                on_device.append(device_decodable(data))
            except StopIteration:  # out of here, a DataLoader takes it for the end of the data: the epoch ends
                raise DataError(f"image {source}: cannot read (StopIteration)") from None
            jpegs.append(torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy()))
            sources.append(source)
        return {
            "jpegs": jpegs,
            "sources": sources,
            "on_device": on_device,
            "input_ids": torch.tensor([item["input_ids"] for item in items], dtype=torch.long),
            "attention_mask": torch.tensor([item["attention_mask"] for item in items], dtype=torch.long),
        }
