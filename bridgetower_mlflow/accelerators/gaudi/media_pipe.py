"""Gaudi device decode on habana_frameworks.mediapipe (PyPI habana-media-loader).

Graph: external reader (file paths + token ids) -> ImageDecoder on the HPU (center crop + bicubic
resize to image_size) -> CropMirrorNorm ((x - mean*255) * 1/(std*255)). Modelled on optimum-habana's
examples/contrastive-image-text/clip_media_pipe.py; any start-up failure is reported, never hidden,
including those of the device and the decoder, which the library sets up at the pipe's first iter().

The pipe deep-copies `priv_params` (when the op is made and again at build), so the batch plan lives
on the reader class, as upstream's ClipMediaPipe.batch_sampler does: set_epoch then reaches it.
"""

from __future__ import annotations

import functools
import itertools
import os

import numpy as np

from ...contract import MEDIAPIPE_LOADER
from ...data.device_decode.batch_plan import RankBatchPlan
from ...data.device_decode.jpeg_files import local_jpeg_paths
from ...data.device_decode.sources import find_image_column, plain_dataset
from ...errors import DeviceDecodeUnavailable
from ..base import DecodeRequest, DeviceLoader

_pipe_ids = itertools.count()


@functools.lru_cache(maxsize=1)
def media_pipe_classes():
    """(reader impl class, pipe class, pytorch iterator class), defined once the vendor module loads."""
    from habana_frameworks.mediapipe.backend import graph_legacy  # noqa: F401 - loads libmedia.so (ctypes)
    from habana_frameworks.mediapipe.plugins.iterator_pytorch import HPUGenericPytorchIterator

    reader = _reader_class()
    return reader, _pipe_class(reader), HPUGenericPytorchIterator


def _reader_class() -> type:
    from habana_frameworks.mediapipe.media_types import dtype, readerOutType
    from habana_frameworks.mediapipe.operators.reader_nodes.reader_nodes import (
        media_ext_reader_op_impl,
        media_ext_reader_op_tensor_info,
    )

    class PathsAndTokensReader(media_ext_reader_op_impl):
        """Yields (file paths, input_ids, attention_mask) for this rank's next batch; `source` is set per loader."""

        source: dict = {}

        def __init__(self, params, fw_params):
            source = type(self).source  # a class attribute: the pipe's deep copies cannot detach it
            self.paths, self.input_ids, self.masks = source["paths"], source["input_ids"], source["masks"]
            self.plan, self.largest = source["plan"], source["largest"]
            self.batch_size, self.batches = fw_params.batch_size, None

        def __iter__(self):
            self.batches = iter(self.plan)
            return self

        def __next__(self):
            indices = next(self.batches)
            return (np.array([self.paths[i] for i in indices]), self.input_ids[indices], self.masks[indices])

        def __len__(self):
            return len(self.plan)

        def gen_output_info(self):
            text_shape = np.array([self.input_ids.shape[1], self.batch_size], dtype=np.uint32)  # reversed dims
            return [media_ext_reader_op_tensor_info(dtype.NDT, np.array([self.batch_size], dtype=np.uint32), ""),
                    media_ext_reader_op_tensor_info(dtype.UINT32, text_shape, ""),
                    media_ext_reader_op_tensor_info(dtype.UINT32, text_shape, "")]

        def get_largest_file(self):
            return self.largest

        def get_media_output_type(self):
            return readerOutType.FILE_LIST

    return PathsAndTokensReader


def _pipe_class(reader_class):
    from habana_frameworks.mediapipe import fn
    from habana_frameworks.mediapipe.media_types import dtype, ftype, imgtype, randomCropType
    from habana_frameworks.mediapipe.mediapipe import MediaPipe

    class BridgeTowerMediaPipe(MediaPipe):
        def __init__(self, source: dict, batch_size: int, image, queue_depth: int = 3):
            super().__init__(device="legacy", prefetch_depth=queue_depth, batch_size=batch_size,
                             pipe_name=f"BridgeTowerMediaPipe:{next(_pipe_ids)}")
            image_size = image.size
            reader = type("BridgeTowerReader", (reader_class,), {"source": source})
            self.reader = fn.MediaExtReaderOp(impl=reader, num_outputs=3, priv_params={})
            self.decode = fn.ImageDecoder(device="hpu", output_format=imgtype.RGB_P,
                                          random_crop_type=randomCropType.CENTER_CROP,
                                          resize=[image_size, image_size], resampling_mode=ftype.BICUBIC)
            mean_255, inv_std_255 = media_norm_constants(image.mean, image.std)
            self.mean = fn.MediaConst(data=mean_255, shape=[1, 1, 3], dtype=dtype.FLOAT32)()
            self.inv_std = fn.MediaConst(data=inv_std_255, shape=[1, 1, 3], dtype=dtype.FLOAT32)()
            self.normalize = fn.CropMirrorNorm(crop_w=image_size, crop_h=image_size, crop_pos_x=0.5,
                                               crop_pos_y=0.5, crop_d=0, dtype=dtype.FLOAT32)

        def definegraph(self):
            files, input_ids, masks = self.reader()
            return self.normalize(self.decode(files), self.mean, self.inv_std), input_ids, masks

    return BridgeTowerMediaPipe


def media_norm_constants(mean, std) -> tuple[np.ndarray, np.ndarray]:
    """CropMirrorNorm computes (x - mean) * std on 0..255 pixels: pass mean*255 and 1/(std*255)."""
    mean = np.asarray(mean, dtype=np.float32)
    std = np.asarray(std, dtype=np.float32)
    return mean * 255, 1 / (std * 255)


class MediaPipeBatches:
    """Model-ready batches from the pipe's iterator (`host_loader`: the pipe's queue is what the step waits on)."""

    def __init__(self, iterator, plan: RankBatchPlan, dataset):
        self.host_loader, self.plan, self.dataset, self.batch_size = iterator, plan, dataset, plan.batch_size

    def __len__(self) -> int:
        return len(self.plan)

    def set_epoch(self, epoch: int) -> None:
        self.plan.set_epoch(epoch)

    def skip_batches_once(self, batches: int) -> None:
        self.plan.skip_once(batches)

    def __iter__(self):
        for pixel_values, input_ids, attention_mask in self.host_loader:
            yield {"pixel_values": pixel_values, "input_ids": input_ids.long(),
                   "attention_mask": attention_mask.long(), "return_loss": True}


def reader_source(dataset, plan: RankBatchPlan) -> dict:
    """Paths and token arrays the reader serves; DeviceDecodeUnavailable unless every image is a JPEG.

    Images held as bytes are written once as files (data/device_decode/jpeg_files.py): the pipe reads files.
    """
    paths = local_jpeg_paths(dataset, find_image_column(dataset), "the Habana media pipeline")
    return {"paths": paths, "plan": plan, "largest": max(paths, key=os.path.getsize),
            "input_ids": np.asarray(dataset["input_ids"], dtype=np.uint32),
            "masks": np.asarray(dataset["attention_mask"], dtype=np.uint32)}


def build_media_pipe_loader(request: DecodeRequest) -> DeviceLoader:
    """The Habana media-pipeline train loader; raises DeviceDecodeUnavailable with the reason."""
    try:
        _, pipe_class, iterator_class = media_pipe_classes()
    except (ImportError, OSError) as exc:  # OSError: the natives' libmedia.so is not there
        raise DeviceDecodeUnavailable(
            f"habana_frameworks.mediapipe is not importable ({exc}); install habana-media-loader and the "
            "Habana software stack whose natives (media_pipe_*, libmedia.so) it loads"
        ) from None
    dataset = plain_dataset(request.dataset)
    if len(dataset) == 0:
        raise DeviceDecodeUnavailable("the training split is empty")
    plan = RankBatchPlan(len(dataset), request.batch_size, seed=request.seed, rank=request.rank,
                         world_size=request.world_size, drop_last=request.drop_last)
    plan.pad_last_batch = True  # without drop_last the pipe still needs full batches: wrap, as upstream's sampler
    source = reader_source(dataset, plan)
    try:
        pipe = pipe_class(source, request.batch_size, request.image)
        iterator = iterator_class(mediapipe=pipe)
        # the device and the decoder (sized from the largest file) are set up at the first iter(), so start
        # here: a failure then is a reason to fall back, not a crash in the first training step. The next
        # iter() flushes these prefetched batches and restarts from the plan as it is by then.
        iter(iterator)
    except Exception as exc:  # noqa: BLE001 - any start-up failure becomes the reported reason
        raise DeviceDecodeUnavailable(
            f"the Habana media pipeline failed to start: {type(exc).__name__}: {exc}") from None
    return DeviceLoader(name=MEDIAPIPE_LOADER, loader=MediaPipeBatches(iterator, plan, dataset), length=len(plan))

