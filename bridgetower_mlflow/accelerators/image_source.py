"""Raw image access and per-rank batch plans shared by the on-device loaders."""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import DataError
from .base import DeviceDecodeUnavailable

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
        return Path(path).read_bytes()
    except (OSError, TypeError) as exc:
        raise DataError(f"image {path}: cannot read ({exc})") from None


def require_jpeg(data: bytes, where: str, decoder: str) -> None:
    if not data.startswith(JPEG_MAGIC):
        raise DeviceDecodeUnavailable(f"{decoder} decodes JPEG only, and {where} is not a JPEG")


class RankBatchPlan:
    """Shuffled, rank-sharded index batches (DistributedSampler semantics) reseeded per epoch."""

    def __init__(self, size: int, batch_size: int, *, seed: int, rank: int = 0, world_size: int = 1,
                 pad_last_batch: bool = False, shuffle: bool = True):
        self.size, self.batch_size, self.seed = size, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.pad_last_batch, self.shuffle, self.epoch = pad_last_batch, shuffle, 0
        self.per_rank = math.ceil(size / world_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return math.ceil(self.per_rank / self.batch_size)

    def rank_indices(self) -> list[int]:
        import torch

        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.size, generator=generator).tolist()
        else:
            order = list(range(self.size))
        total = self.per_rank * self.world_size
        order = _wrap(order, total)  # every rank gets the same count, as DistributedSampler
        return order[self.rank:total:self.world_size]

    def __iter__(self):
        mine = self.rank_indices()
        if self.pad_last_batch:
            mine = _wrap(mine, len(self) * self.batch_size)  # the media pipe needs full batches
        for start in range(0, len(mine), self.batch_size):
            yield mine[start:start + self.batch_size]


def _wrap(seq: list, length: int) -> list:
    """`seq` repeated from its start until it is `length` long."""
    return (seq * math.ceil(length / max(len(seq), 1)))[:length]
