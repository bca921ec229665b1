"""NVIDIA device decode: workers read JPEG bytes; nvJPEG decodes the batch on the GPU.

Workers only read files and check headers; the main process runs one batched
`torchvision.io.decode_jpeg(..., device='cuda')`, then crop/resize/normalize on the GPU. An image
nvJPEG cannot take (PNG, CMYK, one it rejects) is decoded on the CPU, moved over and counted.
The decode runs on a side stream: the next batch decodes while the step before it still computes, and
the compute stream waits for it on the device (wait_stream), never the host for the compute stream.
"""

from __future__ import annotations

import io
import logging
from typing import TYPE_CHECKING

import numpy as np

from ...contract import NVJPEG_LOADER
from ...data.device_decode.batch_plan import RankBatchPlan
from ...data.device_decode.image_ops import DeviceImageOps
from ...data.device_decode.sources import JpegBytesCollate, find_image_column, plain_dataset, read_bytes, require_jpeg
from ...errors import DataError, DeviceDecodeUnavailable
from .. import installed
from ..base import DecodeRequest, DeviceLoader

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


class NvjpegBatches:
    """Model-ready batches on the GPU; `host_loader` is the byte reader (what the loader wait times)."""

    def __init__(self, host_loader, plan: RankBatchPlan, dataset, ops: DeviceImageOps):
        self.host_loader, self.plan, self.dataset, self.ops = host_loader, plan, dataset, ops
        self.device, self.batch_size = ops.device, plan.batch_size
        self.cpu_decoded_images = 0
        self._side_stream: torch.cuda.Stream | None = None  # made on the first batch, on the loader's GPU

    def __len__(self) -> int:
        return len(self.plan)

    def set_epoch(self, epoch: int) -> None:
        self.plan.set_epoch(epoch)

    def skip_batches_once(self, batches: int) -> None:
        self.plan.skip_once(batches)

    def __iter__(self):
        for batch in self.host_loader:
            yield self.to_device(batch)

    def to_device(self, batch: dict) -> dict:
        """The batch on the GPU, decoded on the side stream; the compute stream waits for it there, and its
        tensors are marked as used by the compute stream (their memory is not reused before it is done)."""
        import torch

        if not torch.cuda.is_available():
            return self._decoded(batch)
        if self._side_stream is None:
            self._side_stream = torch.cuda.Stream(device=self.device)
        compute = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self._side_stream):
            ready = self._decoded(batch)
        compute.wait_stream(self._side_stream)
        for value in ready.values():
            if isinstance(value, torch.Tensor):
                value.record_stream(compute)
        return ready

    def _decoded(self, batch: dict) -> dict:
        images = self.decode(batch["jpegs"], batch["sources"], batch["on_device"])
        pixels = self.ops.normalize(self.ops.crop_resize(images))
        return {
            "pixel_values": pixels,
            "input_ids": batch["input_ids"].to(self.device, non_blocking=True),
            "attention_mask": batch["attention_mask"].to(self.device, non_blocking=True),
            "return_loss": True,
        }

    def decode(self, jpegs: list, sources: list, on_device: list) -> list:
        """(3,H,W) uint8 tensors on the GPU, in batch order; the CPU takes what nvJPEG cannot."""
        gpu = [i for i, ok in enumerate(on_device) if ok]
        images: list = [None] * len(jpegs)
        try:
            decoded = decode_on_gpu([jpegs[i] for i in gpu], self.device) if gpu else []
        except RuntimeError:
            decoded = [self._one_on_gpu(jpegs[i]) for i in gpu]  # find the ones it rejects
        for position, image in zip(gpu, decoded):
            images[position] = image
        for position, image in enumerate(images):
            if image is None:
                images[position] = self._on_cpu(jpegs[position], sources[position])
        return images

    def _one_on_gpu(self, data):
        try:
            return decode_on_gpu([data], self.device)[0]
        except RuntimeError:
            return None

    def _on_cpu(self, data, source: str):
        import torch
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(data.numpy().tobytes())) as image:
                pixels = np.asarray(image.convert("RGB"))
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
            raise DataError(f"image {source}: cannot decode ({exc}); allowed: readable JPEG/PNG images") from None
        if self.cpu_decoded_images == 0:
            log.warning("nvJPEG cannot decode %s: decoding such images on the CPU (counted in "
                        "data_loader_cpu_decoded_images)", source)
        self.cpu_decoded_images += 1
        tensor = torch.from_numpy(pixels.transpose(2, 0, 1).copy())
        if self.device.type == "cuda":
            tensor = tensor.pin_memory()
        return tensor.to(self.device, non_blocking=True)


def decode_on_gpu(jpegs: list, device) -> list:
    """Batched nvJPEG decode to RGB, ordered after the work already queued on the current stream.

    torchvision decodes on a private stream into memory the caching allocator may hand back while
    the current stream still reads it (pytorch/vision #9606; torchcodec #1634 fixed the same with a
    host-side wait): the current stream is drained first. NvjpegBatches calls it on its side stream, so
    what is drained is the previous batch's decode, not the step's compute.
    """
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    torch.cuda.current_stream(device).synchronize()
    return decode_jpeg(jpegs, mode=ImageReadMode.RGB, device=device)


def check_nvjpeg_ready(device) -> None:
    """Raise DeviceDecodeUnavailable unless torchvision can decode a JPEG on `device`."""
    try:
        import torchvision
        from torchvision.io import decode_jpeg
    except Exception as exc:  # noqa: BLE001 - a CUDA-major mismatch is a RuntimeError at import
        first = (str(exc).splitlines() or [""])[0][:200]
        why = installed.BROKEN_MODULES.get("torchvision") or f"{type(exc).__name__}: {first}"
        raise DeviceDecodeUnavailable(f"torchvision is not usable ({why}); install the torchvision of your "
                                      "torch's release line (pip install '.[cuda]')") from None
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
    # a split that is not JPEG at all would decode everything on the CPU: refuse it up front
    require_jpeg(read_bytes(dataset[0][column]), f"the first image of column '{column}'", "nvJPEG")
    plan = RankBatchPlan(len(dataset), request.batch_size, seed=request.seed, rank=request.rank,
                         world_size=request.world_size, drop_last=request.drop_last)
    workers = request.num_workers
    byte_loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=plan, num_workers=workers, collate_fn=JpegBytesCollate(column),
        pin_memory=torch.cuda.is_available(), persistent_workers=False, prefetch_factor=4 if workers else None,
    )
    ops = DeviceImageOps(request.image, device, pinned=torch.device(device).type == "cuda")
    batches = NvjpegBatches(byte_loader, plan, dataset, ops)
    return DeviceLoader(name=NVJPEG_LOADER, loader=batches, length=len(plan))


def _tiny_jpeg() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (128, 64, 32)).save(buffer, format="JPEG")
    return buffer.getvalue()
