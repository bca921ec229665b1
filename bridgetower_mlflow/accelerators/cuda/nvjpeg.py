"""NVIDIA device decode: workers read JPEG bytes; nvJPEG decodes the batch on the GPU.

Workers only read files (no decode); the main process runs one batched
`torchvision.io.decode_jpeg(..., device='cuda')`, then crop/resize/normalize on the GPU.
"""

from __future__ import annotations

import numpy as np

from ...contract import NVJPEG_LOADER
from ...data.device_decode.batch_plan import RankBatchPlan
from ...data.device_decode.image_ops import crop_resize, normalize
from ...data.device_decode.sources import JpegBytesCollate, find_image_column, plain_dataset, read_bytes, require_jpeg
from ...errors import DataError, DeviceDecodeUnavailable
from ..base import DecodeRequest, DeviceLoader


class NvjpegBatches:
    """Iterable of model-ready batches on the GPU; `set_epoch` reshuffles like DistributedSampler."""

    def __init__(self, byte_loader, plan: RankBatchPlan, *, device, image):
        self.byte_loader, self.plan, self.device, self.image = byte_loader, plan, device, image
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
        pixels = normalize(crop_resize(images, self.image.size), self.image.mean, self.image.std)
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


def build_nvjpeg_loader(request: DecodeRequest, device) -> DeviceLoader:
    """The nvJPEG train loader on `device`; raises DeviceDecodeUnavailable with the reason."""
    import torch

    check_nvjpeg_ready(device)
    dataset = plain_dataset(request.dataset)
    column = find_image_column(dataset)
    if len(dataset) == 0:
        raise DeviceDecodeUnavailable("the training split is empty")
    require_jpeg(read_bytes(dataset[0][column]), f"the first image of column '{column}'", "nvJPEG")
    plan = RankBatchPlan(len(dataset), request.batch_size, seed=request.seed, rank=request.rank,
                         world_size=request.world_size)
    workers = request.num_workers
    byte_loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=plan, num_workers=workers, collate_fn=JpegBytesCollate(column),
        pin_memory=True, persistent_workers=False, prefetch_factor=4 if workers else None,
    )
    batches = NvjpegBatches(byte_loader, plan, device=device, image=request.image)
    return DeviceLoader(name=NVJPEG_LOADER, loader=batches, length=len(plan))


def _tiny_jpeg() -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (128, 64, 32)).save(buffer, format="JPEG")
    return buffer.getvalue()
