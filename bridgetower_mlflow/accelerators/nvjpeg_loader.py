"""NVIDIA device decode: workers read JPEG bytes; nvJPEG decodes the batch on the GPU.

Workers only read files (no decode); the main process runs one batched
`torchvision.io.decode_jpeg(..., device='cuda')`, then crop/resize/normalize on the GPU.
"""

from __future__ import annotations

import numpy as np

from ..errors import DataError
from .base import DeviceDecodeUnavailable, DeviceLoader
from .device_image_ops import crop_resize, normalize
from .image_source import (RankBatchPlan, find_image_column, plain_dataset, read_bytes,
                           require_jpeg)


class JpegBytesCollate:
    """Worker-side collate: encoded bytes as uint8 tensors plus the already tokenized text."""

    def __init__(self, image_column: str):
        self.image_column = image_column

    def __call__(self, items: list[dict]) -> dict:
        import torch

        jpegs, sources = [], []
        for item in items:
            value = item[self.image_column]
            jpegs.append(torch.from_numpy(np.frombuffer(read_bytes(value), dtype=np.uint8).copy()))
            sources.append(value.get("path") if isinstance(value, dict) else str(value))
        return {
            "jpegs": jpegs,
            "sources": sources,
            "input_ids": torch.tensor([item["input_ids"] for item in items], dtype=torch.long),
            "attention_mask": torch.tensor([item["attention_mask"] for item in items], dtype=torch.long),
        }


class NvjpegBatches:
    """Iterable of model-ready batches on the GPU; `set_epoch` reshuffles like DistributedSampler."""

    def __init__(self, byte_loader, plan: RankBatchPlan, *, device, image_size: int, mean, std):
        self.byte_loader, self.plan, self.device = byte_loader, plan, device
        self.image_size, self.mean, self.std = image_size, tuple(mean), tuple(std)
        self.batch_size = plan.batch_size

    def __len__(self) -> int:
        return len(self.plan)

    def set_epoch(self, epoch: int) -> None:
        self.plan.set_epoch(epoch)

    def __iter__(self):
        for batch in self.byte_loader:
            yield self.to_device(batch)

    def to_device(self, batch: dict) -> dict:
        images = decode_on_gpu(batch["jpegs"], batch["sources"], self.device)
        pixels = normalize(crop_resize(images, self.image_size), self.mean, self.std)
        return {
            "pixel_values": pixels,
            "input_ids": batch["input_ids"].to(self.device, non_blocking=True),
            "attention_mask": batch["attention_mask"].to(self.device, non_blocking=True),
            "return_loss": True,
        }


def decode_on_gpu(jpegs: list, sources: list, device) -> list:
    """Batched nvJPEG decode to RGB; a bad file is named in a DataError."""
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        return decode_jpeg(jpegs, mode=ImageReadMode.RGB, device=device)
    except RuntimeError:
        for data, source in zip(jpegs, sources):  # find the culprit; rare, so decoding twice is fine
            try:
                decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
            except RuntimeError as exc:
                raise DataError(f"image {source}: nvJPEG cannot decode it ({exc})") from None
        raise


def check_nvjpeg_ready(device) -> None:
    """Raise DeviceDecodeUnavailable unless torchvision can decode a JPEG on `device`."""
    try:
        import torchvision  # noqa: F401
        from torchvision.io import decode_jpeg
    except ImportError as exc:
        raise DeviceDecodeUnavailable(f"torchvision is not importable ({exc}); install the cuda extra") from None
    import torch

    if not torch.cuda.is_available():
        raise DeviceDecodeUnavailable("no CUDA device is visible to torch")
    probe = torch.from_numpy(np.frombuffer(_tiny_jpeg(), dtype=np.uint8).copy())
    try:
        decode_jpeg([probe], device=device)
    except (RuntimeError, TypeError) as exc:
        raise DeviceDecodeUnavailable(
            f"torchvision {torchvision.__version__} cannot decode on {device} ({exc})"
        ) from None


def build_nvjpeg_loader(dataset, *, batch_size: int, seed: int, image_size: int, mean, std,
                        num_workers: int, rank: int, world_size: int, device) -> DeviceLoader:
    """The nvJPEG train loader; raises DeviceDecodeUnavailable with the reason."""
    import torch

    check_nvjpeg_ready(device)
    dataset = plain_dataset(dataset)
    column = find_image_column(dataset)
    if len(dataset) == 0:
        raise DeviceDecodeUnavailable("the training split is empty")
    require_jpeg(read_bytes(dataset[0][column]), f"the first image of column '{column}'", "nvJPEG")
    plan = RankBatchPlan(len(dataset), batch_size, seed=seed, rank=rank, world_size=world_size)
    byte_loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=plan, num_workers=num_workers, collate_fn=JpegBytesCollate(column),
        pin_memory=True, persistent_workers=False, prefetch_factor=4 if num_workers else None,
    )
    batches = NvjpegBatches(byte_loader, plan, device=device, image_size=image_size, mean=mean, std=std)
    return DeviceLoader(name="nvjpeg", loader=batches, length=len(plan))


def _tiny_jpeg() -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (128, 64, 32)).save(buffer, format="JPEG")
    return buffer.getvalue()
