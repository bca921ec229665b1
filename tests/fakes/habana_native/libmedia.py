"""Fake of Habana's libmedia.so: mediaPipelineRunHpu, the device that decodes and runs the compiled graph.

backend/legacy.py loads it with ctypes.CDLL("libmedia.so") and calls mediaPipelineRunHpu with C
structs; here it is a ctypes callback with the C prototype, so every argument arrives as the real
library would see it (addresses) and is read through mirrors of the C structs. The "device" is the
CPU: the decoder crops (CENTER_CROP: the central region of the output's aspect) and resizes with
PIL, CropMirrorNorm crops at crop_pos, mirrors on request and computes (x - mean) * inv_std with the
constants the graph passed; outputs are written into the buffers the framework proxy allocated, the
bypass buffers (the reader's token ids) copied next to them, and the run queued for getOutput.
"""

from __future__ import annotations

import ctypes
import sys
import traceback

import media_pipe_types as mpt
import numpy as np

MEDIA_SUCCESS, MEDIA_FAIL, MEDIA_INVALID_ARGUMENT, MEDIA_NOT_SUPPORTED = 0, -1, -2, -3
PIL_FILTERS = {0: "BILINEAR", 1: "LANCZOS", 2: "NEAREST", 3: "BILINEAR", 4: "BICUBIC", 6: "BOX"}  # media ftype


class _FileList(ctypes.Structure):
    _fields_ = [("filePath", ctypes.POINTER(ctypes.c_char_p))]


class _BufferList(ctypes.Structure):
    _fields_ = [("bufferAddr", ctypes.POINTER(ctypes.c_char_p)), ("bufferSizes", ctypes.POINTER(ctypes.c_uint32))]


class _InputTypeList(ctypes.Union):
    _fields_ = [("fileList", _FileList), ("bufferList", _BufferList)]


class _InputList(ctypes.Structure):
    _fields_ = [("list", _InputTypeList), ("listSize", ctypes.c_int)]


class Recipe:
    """What compile returns: the shape (C order of dims: W, H, C, N) of every tensor of the graph."""

    def __init__(self, shapes: dict):
        self.shapes = shapes


def compile_graph(placeholders: dict, ops: list, outputs: list) -> Recipe:
    """Shapes as the graph compiler infers them; a RuntimeError (pybind's translation) for a graph it refuses."""
    shapes = {(name, 0): p["dims"] for name, p in placeholders.items()}
    for op in ops:
        missing = [f"{node}:{port}" for node, port in op["inputs"] if (node, port) not in shapes]
        if missing or len(op["inputs"]) != 3:
            raise RuntimeError(f"compile: {op['name']} inputs {op['inputs']} (missing {missing})")
        image, *norms = op["inputs"]
        width, height, channels, batch = _whcn(shapes[image], placeholders.get(image[0]), op["name"])
        params = op["params"]
        if not (0 < params["crop_w"] <= width and 0 < params["crop_h"] <= height):
            raise RuntimeError(f"compile: {op['name']} crop {params['crop_w']}x{params['crop_h']} of {width}x{height}")
        for node, _ in norms:
            norm = placeholders.get(node)
            if norm is None or norm["kind"] != "const" or norm["dims"] not in ([1, 1, channels, batch],
                                                                               [1, 1, channels, 1]):
                raise RuntimeError(f"compile: {op['name']} takes constant [1,1,C,N] mean and inv_std, got {node}")
        shapes[(op["name"], 0)] = [params["crop_w"], params["crop_h"], channels, batch]
    unknown = [out for out in outputs if out not in shapes]
    if unknown:
        raise RuntimeError(f"compile: outputs {unknown} are not in the graph")
    return Recipe(shapes)


def _whcn(dims: list, placeholder: dict | None, name: str) -> list:
    if len(dims) != 4 or (placeholder is not None and placeholder["layout"] != "WHCN"):
        raise NotImplementedError(f"{name}: the fake CropMirrorNorm takes planar WHCN images only")
    return dims


def decoder_settings(args: dict) -> dict:
    """The decoder's configuration; ValueError when the largest file cannot size the buffers."""
    if args["input_format"] != mpt.mediaInputType.FILE_LIST or args["decoder_type"] != mpt.DecoderType.IMAGE_DECODER:
        raise NotImplementedError("the fake decoder reads FILE_LIST images only")
    crop = args["crop_type"]
    if crop not in (mpt.RandomCropType.CENTER_CROP, mpt.RandomCropType.NO_RANDOM_CROP) or any(
            args["crop_after_resize"]) or args["resampling"] not in PIL_FILTERS:
        raise NotImplementedError(f"the fake decoder does not do {crop}, crop_after_resize or filter "
                                  f"{args['resampling']}")
    header = _open_jpeg(args["largest_file"])  # the real decoder sizes its buffers from this file's header
    if args["width"] <= 0 or args["height"] <= 0:
        raise ValueError(f"resize {args['width']}x{args['height']}")
    planar = args["out_format"] == mpt.MediaPictureFormat.MEDIA_OUT_RGB_PLANAR
    return {**args, "planar": planar, "largest_size": header}


def _open_jpeg(path: str):
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            if image.format != "JPEG":
                raise ValueError(f"{path}: {image.format}, not a JPEG")
            return image.size
    except (OSError, UnidentifiedImageError, SyntaxError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def decode(paths: list[str], settings: dict) -> np.ndarray:
    """The decoder's uint8 batch: (N, 3, H, W) planar or (N, H, W, 3) interleaved."""
    from PIL import Image

    width, height = settings["width"], settings["height"]
    images = []
    for path in paths:
        _open_jpeg(path)
        with Image.open(path) as image:
            image = image.convert("RGB")
            box = _crop_box(image.size, width / height) if settings["crop_type"] == \
                mpt.RandomCropType.CENTER_CROP else None
            images.append(np.asarray(image.resize((width, height), getattr(Image, PIL_FILTERS[settings["resampling"]]),
                                                  box=box)))
    batch = np.stack(images)
    return np.ascontiguousarray(batch.transpose(0, 3, 1, 2)) if settings["planar"] else batch


def _crop_box(size: tuple, aspect: float) -> tuple:
    width, height = size
    crop_w, crop_h = (round(height * aspect), height) if width / height > aspect else (width, round(width / aspect))
    left, top = (width - crop_w) // 2, (height - crop_h) // 2
    return left, top, left + crop_w, top + crop_h


def crop_mirror_norm(image: np.ndarray, mean: np.ndarray, inv_std: np.ndarray, params: dict, dtype) -> np.ndarray:
    """(N, C, H, W) -> crop at crop_pos, optional horizontal mirror, (x - mean) * inv_std, cast to the node's type."""
    from media_pipe_params import NP_DTYPES

    height, width = image.shape[2:]
    left = round(params["crop_pos_x"] * (width - params["crop_w"]))
    top = round(params["crop_pos_y"] * (height - params["crop_h"]))
    out = image[:, :, top:top + params["crop_h"], left:left + params["crop_w"]].astype(np.float32)
    if params["mirror"]:
        out = out[..., ::-1]
    return np.ascontiguousarray(((out - mean) * inv_std).astype(NP_DTYPES[dtype]))


def run(manager, paths: list[str], bypass: list[int], outputs: list[int]) -> int:
    """One batch through the graph; the results land in `outputs` (device addresses) and the run is queued."""
    runtime = manager.runtime
    if len(paths) != runtime["batch_size"]:
        return MEDIA_INVALID_ARGUMENT  # the decoder fills exactly batch_size slots
    values = {(name, 0): p["data"] for name, p in manager.placeholders.items() if p["kind"] == "const"}
    decoder = next(name for name, p in manager.placeholders.items() if p["kind"] == "decoder")
    values[(decoder, 0)] = decode(paths, manager.decoder)
    for op in manager.ops:
        image, mean, inv_std = (values[port] for port in op["inputs"])
        values[(op["name"], 0)] = crop_mirror_norm(image, mean, inv_std, op["params"], op["dtype"])
    results = [values[port] for port in manager.outputs]
    for address, array in zip(outputs, results):
        ctypes.memmove(address, array.ctypes.data, array.nbytes)
    from media_pipe_params import NP_DTYPES

    for address, source, (dtype, shape) in zip(outputs[len(results):], bypass, runtime["bypass"]):
        ctypes.memmove(address, source, int(np.prod(shape)) * np.dtype(NP_DTYPES[dtype]).itemsize)
    manager.queue.append(list(outputs))
    return MEDIA_SUCCESS


def _run_hpu(pipe_manager, input_list, frames, resample, crops, host_buffers, bypass_buffers, out_buffers) -> int:
    from media_pipe_api import by_address

    manager = by_address.get(pipe_manager)
    try:
        if manager is None or manager.decoder is None or "startPipelineExecutor" not in manager.calls:
            return MEDIA_INVALID_ARGUMENT
        if crops or resample or frames:
            return MEDIA_NOT_SUPPORTED  # random crop windows and video are not faked
        listed = ctypes.cast(input_list, ctypes.POINTER(_InputList)).contents
        paths = [listed.list.fileList.filePath[i].decode("utf-8") for i in range(listed.listSize)]
        count = len(manager.outputs) + len(manager.runtime["bypass"])
        bypass = [ctypes.cast(bypass_buffers, ctypes.POINTER(ctypes.c_void_p))[i]
                  for i in range(len(manager.runtime["bypass"]))]
        outputs = [ctypes.cast(out_buffers, ctypes.POINTER(ctypes.c_uint64))[i] for i in range(count)]
        return run(manager, paths, bypass, outputs)
    except Exception:  # noqa: BLE001 - a C function reports a status; the reason goes to the log
        manager.last_error = traceback.format_exc()
        print(manager.last_error, file=sys.stderr)
        return MEDIA_FAIL


PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int, *[ctypes.c_void_p] * 8)


class Library:
    """What ctypes.CDLL("libmedia.so") returns; the callback is kept alive with it."""

    def __init__(self):
        self.mediaPipelineRunHpu = PROTOTYPE(_run_hpu)
        self.mediaPipelineRunHpu.__name__ = "mediaPipelineRunHpu"


LIBRARY = Library()
