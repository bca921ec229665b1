"""A CPU emulation of the habana_frameworks.mediapipe calls our pipe makes (habana-media-loader 1.24.1).

The graph the pipe defines is walked for real: the reader impl is constructed and iterated, the
decoder crops the central square and resizes with PIL bicubic, CropMirrorNorm computes
(x - mean) * std with the constants the pipe passed. As the real library does, every parameter is
deep-copied when the op is made (operator_specs.updateparams) and again at build (nodes.create_opnode),
the impl is built as impl(params, fw_params), the iterator yields a list of tensors (ids and masks
int32) and its len is the impl's; a new pass calls the impl's __iter__ again.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np

from . import _module


def _copied(params: dict) -> dict:
    """The library's copy rule: everything deep-copied (classes, such as `impl`, stay themselves)."""
    return {key: copy.deepcopy(value) for key, value in params.items()}


class Node:
    def __init__(self, kind, **params):
        self.kind, self.params = kind, _copied(params) if kind == "reader" else params

    def __call__(self, *inputs):
        if self.kind == "reader":
            return tuple(("reader", self, i) for i in range(self.params["num_outputs"]))
        if self.kind == "const":
            return ("const", self.params["data"])
        return (self.kind, self, inputs)


class FakeMediaPipe:
    def __init__(self, device=None, prefetch_depth=2, batch_size=1, num_threads=1, pipe_name=None):
        self.device, self.batch_size, self.pipe_name = device, batch_size, pipe_name


class FakeIterator:
    """HPUGenericPytorchIterator stand-in: runs the reader and emulates decode + normalize."""

    def __init__(self, mediapipe):
        self.pipe = mediapipe
        self.images, self.ids, self.masks = mediapipe.definegraph()
        params = _copied(self.ids[1].params)  # build() copies the op's params once more
        self.impl = params["impl"](params, SimpleNamespace(batch_size=mediapipe.batch_size))
        self.output_info = self.impl.gen_output_info()

    def __len__(self):
        return len(self.impl)

    def __iter__(self):
        self._batches = iter(self.impl)
        return self

    def __next__(self):
        import torch

        paths, ids, masks = next(self._batches)
        _, cmn, (decoded, mean, std) = self.images
        size = decoded[1].params["resize"][0]
        pixels = np.stack([_decode(p, size) for p in paths]).astype(np.float32)  # B,H,W,3
        pixels = (pixels - mean[1].reshape(1, 1, 1, 3)) * std[1].reshape(1, 1, 1, 3)
        return [torch.from_numpy(pixels.transpose(0, 3, 1, 2).copy()),
                torch.from_numpy(ids.astype(np.int32)), torch.from_numpy(masks.astype(np.int32))]


def _decode(path, size):
    from PIL import Image

    image = Image.open(str(path)).convert("RGB")
    width, height = image.size
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    return np.asarray(image.resize((size, size), Image.BICUBIC, box=(left, top, left + side, top + side)))


class ReaderImplBase:
    pass


def install_mediapipe(monkeypatch, fail_on_build: Exception | None = None):
    class Iterator(FakeIterator):
        def __init__(self, mediapipe):
            if fail_on_build:
                raise fail_on_build
            super().__init__(mediapipe)

    names = SimpleNamespace(NDT="NDT", UINT32="UINT32", FLOAT32="FLOAT32")
    _module(monkeypatch, "habana_frameworks")
    _module(monkeypatch, "habana_frameworks.mediapipe")
    _module(monkeypatch, "habana_frameworks.mediapipe.fn",
            MediaExtReaderOp=lambda **kw: Node("reader", **kw), ImageDecoder=lambda **kw: Node("decode", **kw),
            MediaConst=lambda **kw: Node("const", **kw), CropMirrorNorm=lambda **kw: Node("cmn", **kw))
    _module(monkeypatch, "habana_frameworks.mediapipe.media_types", dtype=names,
            ftype=SimpleNamespace(BICUBIC="BICUBIC"), imgtype=SimpleNamespace(RGB_P="RGB_P"),
            randomCropType=SimpleNamespace(CENTER_CROP="CENTER_CROP"),
            readerOutType=SimpleNamespace(FILE_LIST="FILE_LIST"))
    _module(monkeypatch, "habana_frameworks.mediapipe.mediapipe", MediaPipe=FakeMediaPipe)
    _module(monkeypatch, "habana_frameworks.mediapipe.operators")
    _module(monkeypatch, "habana_frameworks.mediapipe.operators.reader_nodes")
    _module(monkeypatch, "habana_frameworks.mediapipe.operators.reader_nodes.reader_nodes",
            media_ext_reader_op_impl=ReaderImplBase,
            media_ext_reader_op_tensor_info=lambda dtype, shape, layout: SimpleNamespace(dtype=dtype, shape=shape))
    _module(monkeypatch, "habana_frameworks.mediapipe.plugins")
    _module(monkeypatch, "habana_frameworks.mediapipe.plugins.iterator_pytorch", HPUGenericPytorchIterator=Iterator)
