"""Fake of Habana's `media_pipe_api` (pybind11): the legacy pipe manager, as backend/cal.py drives it.

The pipe manager records the graph the library declares (decoder placeholder, constants with the
data their pointers hold, operator nodes with their C params, outputs), compiles it (shapes as the
graph compiler infers them, or a RuntimeError), and keeps the runtime state libmedia's
mediaPipelineRunHpu needs. Calls return `status` values as the real API does (cal.is_ok raises on
anything but SUCCESS); a missing device or an unreadable largest file fail where they fail on a Gaudi.
Every manager made is in `managers`, newest last, so a test can read what the library passed down.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
import os
from collections import deque

import media_pipe_params as mpp
import media_pipe_proxy as mppy
import media_pipe_types as mpt
import numpy as np
from media_pipe_params import NP_DTYPES, Field, Struct, c_array, dims_of, expect

managers: list = []
by_address: dict = {}
_addresses = itertools.count(0x7F0000100000, 0x1000)


class nodePort(Struct):
    __slots__ = ()
    nodeName = Field(str, "")
    nodePort = Field(int, 0)


class metadata(Struct):
    __slots__ = ()
    dtype = Field(mpt.dType, mpt.dType.NA)
    numShapeDim = Field(int, 0)
    shape = Field(("array", 5))


class mediaRandomCrop(Struct):
    __slots__ = ()
    scale_min, scale_max = Field(float, 0.0), Field(float, 0.0)
    ratio_min, ratio_max = Field(float, 0.0), Field(float, 0.0)
    seed = Field(int, 0)


DECODER_ARGS = (("largest_file", str), ("input_format", mpt.mediaInputType), ("in_format", mpt.MediaPictureFormat),
                ("out_format", mpt.MediaPictureFormat), ("width", int), ("height", int), ("resampling", int),
                ("stage", mpt.DecoderStage), ("crop_type", mpt.RandomCropType), ("random_crop", mediaRandomCrop),
                ("decoder_type", mpt.DecoderType), ("max_frame_vid", int), ("frames_per_clip", int),
                ("crop_after_resize", list), ("gather", bool), ("output_frames", int), ("dpb_size", int),
                ("spatial_crops", int), ("antialias", bool))


class MetadataOps(enum.Enum):
    crop = 0
    flip = 1
    encode = 2


class SSDMetadataProcessor:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("media_pipe_api.SSDMetadataProcessor is not faked")


class PyTrace:  # HABANA_PROFILE=1 traces; nothing to record here
    StartTrace = EndTrace = staticmethod(lambda name: None)


class TensorInfo:
    def __init__(self, name: str, dims: list):
        self.name, self.numDims = name, len(dims)
        self.dims = np.zeros(5, dtype=np.uint64)
        self.dims[:len(dims)] = dims


def mediaPipeGetDeviceTypeId(name: str) -> int:
    expect(name, str, "mediaPipeGetDeviceTypeId")
    return 1 if name == "HPU" else 0


class pipeManager:
    """One per graph_processor; records the graph, then runs it when libmedia calls `run`."""

    def __init__(self):
        self.address = next(_addresses)
        self.placeholders, self.ops, self.outputs, self.recipe = {}, [], [], None
        self.decoder = self.runtime = self.device_id = None
        self.calls, self.queue, self.closed, self.last_error = [], deque(), False, None
        managers.append(self)
        by_address[self.address] = self

    def _call(self, name: str, needs: str | None = None) -> mpt.status:
        if self.closed:
            raise RuntimeError(f"pipeManager.{name}: the manager is closed")
        if needs and needs not in self.calls:
            raise RuntimeError(f"pipeManager.{name} before {needs}")
        self.calls.append(name)
        return mpt.status.SUCCESS

    def initializeCompiletime(self, device: str) -> None:
        expect(device, str, "initializeCompiletime")
        self._call("initializeCompiletime")

    def createGenericNode(self, inputs: list, params, guid: str, name: str) -> mpt.status:
        expect(guid, str, "createGenericNode")
        expect(name, str, "createGenericNode")
        if not all(isinstance(port, nodePort) for port in inputs):
            raise TypeError("createGenericNode(): inputs must be nodePort")
        if guid == "decoder_node":
            expect(params, mpp.mediaPlaceholderParams, "createGenericNode")
            self.placeholders[name] = {"kind": "decoder", "dims": dims_of(params.shape), "layout": params.layout,
                                       "dtype": params.output.outputType, "data": None}
        elif guid == "crop_mirror_norm":
            expect(params, mpp.cropMirrorNormParams, "createGenericNode")
            self.ops.append({"name": name, "guid": guid, "inputs": [(p.nodeName, p.nodePort) for p in inputs],
                             "params": params.params.as_dict(), "dtype": params.output.outputType})
        else:
            return mpt.status.NOT_SUPPORTED  # the fake device runs the BridgeTower graph's node only
        return self._call("createGenericNode", "initializeCompiletime")

    def createPlaceHolder(self, inputs: list, name: str, params) -> mpt.status:
        expect(params, mpp.mediaPlaceholderParams, "createPlaceHolder")
        dims, dtype, data = dims_of(params.shape), params.output.outputType, None
        const = params.type == mpt.mediaPlaceholderType.CONST_PLACEHOLDER
        if const:  # the backend copies the constant at compile time; the pointer is only valid now
            if not params.dataPtr:
                return mpt.status.INVALID_ARGUMENT
            if dtype not in NP_DTYPES:
                return mpt.status.INVALID_ARGUMENT
            data = np.ctypeslib.as_array(c_array(params.dataPtr, int(np.prod(dims)), dtype)).reshape(dims[::-1]).copy()
        self.placeholders[name] = {"kind": "const" if const else "input", "dims": dims, "dtype": dtype,
                                   "layout": params.layout, "data": data}
        return self._call("createPlaceHolder", "initializeCompiletime")

    def createOutputPlaceHolder(self, outputs: list) -> mpt.status:
        self.outputs.extend((port.nodeName, port.nodePort) for port in outputs)
        return self._call("createOutputPlaceHolder", "initializeCompiletime")

    def compile(self):
        self._call("compile", "initializeCompiletime")
        from libmedia import compile_graph

        self.recipe = compile_graph(self.placeholders, self.ops, self.outputs)
        return self.recipe

    def getTensorInfo(self, num_outputs: int, num_inputs: int, num_ws: int) -> list:
        self._call("getTensorInfo", "compile")
        inputs = [TensorInfo(name, p["dims"]) for name, p in self.placeholders.items() if p["kind"] != "const"]
        outputs = [TensorInfo(f"{node}_{port}", self.recipe.shapes[(node, port)]) for node, port in self.outputs]
        if (len(inputs), len(outputs)) != (num_inputs, num_outputs):
            raise RuntimeError(f"getTensorInfo: the recipe has {len(inputs)} inputs and {len(outputs)} outputs")
        return inputs + outputs

    def getInputTensorNames(self) -> list:
        return [name for name, p in self.placeholders.items() if p["kind"] != "const"]

    def getOutputTensorNames(self) -> list:
        return [f"{node}_{port}" for node, port in self.outputs]

    def initializeRuntime(self, queue_depth: int, batch_size: int, framework, proxy, nhgops: list) -> None:
        expect(framework, mppy.fwType, "initializeRuntime")
        if not all(isinstance(m, metadata) for m in nhgops):
            raise TypeError("initializeRuntime(): the bypass list must be metadata")
        callbacks = mppy.proxies.get(proxy) if framework == mppy.fwType.PYTHON_FW else None
        if framework == mppy.fwType.PYTHON_FW and callbacks is None:
            raise RuntimeError("initializeRuntime: PYTHON_FW without a registered proxy")
        self.runtime = {"queue_depth": queue_depth, "batch_size": batch_size, "framework": framework,
                        "proxy": callbacks, "bypass": [(m.dtype, [int(d) for d in m.shape[:m.numShapeDim]])
                                                       for m in nhgops]}
        if callbacks:
            self.runtime["stream"] = callbacks["get_compute_stream"]()
        self._call("initializeRuntime", "compile")

    def get_ptr(self) -> int:
        return self.address

    def acquireDevice(self, device) -> mpt.status:
        expect(device, mpt.device, "acquireDevice")
        self._call("acquireDevice", "initializeRuntime")
        if os.environ.get("FAKE_HPU_COUNT", "8") == "0":
            return mpt.status.DEVICE_NOT_FOUND
        proxy = self.runtime["proxy"]
        self.device_id = proxy["get_device_id"](0) if proxy else 0
        return mpt.status.SUCCESS if isinstance(self.device_id, int) else mpt.status.FAILURE

    def decoderMemInit(self, *args) -> mpt.status:
        if len(args) != len(DECODER_ARGS):
            raise TypeError(f"decoderMemInit(): takes {len(DECODER_ARGS)} arguments, got {len(args)}")
        for value, (name, kind) in zip(args, DECODER_ARGS):
            expect(value, kind, f"decoderMemInit[{name}]")
        self._call("decoderMemInit", "acquireDevice")
        from libmedia import decoder_settings

        try:
            self.decoder = decoder_settings(dict(zip((name for name, _ in DECODER_ARGS), args)))
        except ValueError as exc:  # the C side logs why and returns a failure status
            self.last_error = str(exc)
            return mpt.status.FAILURE
        return mpt.status.SUCCESS

    def getOutput(self) -> list:
        if not self.queue:
            raise RuntimeError("getOutput: no run is queued (the real call would wait forever)")
        return self.queue.popleft()

    def asCpu(self, device_addr: int, host_addr: int, nbytes: int) -> mpt.status:
        ctypes.memmove(host_addr, device_addr, nbytes)
        return mpt.status.SUCCESS

    def flushPipeline(self) -> mpt.status:
        self.queue.clear()
        return self._call("flushPipeline")

    def releaseDevice(self) -> mpt.status:
        proxy = (self.runtime or {}).get("proxy")
        if proxy and self.device_id is not None:
            proxy["release_device_id"](self.device_id)
        self.device_id = None
        return self._call("releaseDevice")

    def freeRawDevBuffer(self, device_addr: int) -> None:  # SYNAPSE_FW buffers: nothing was allocated
        pass

    def add_cpp_compute_node(self, processor) -> None:
        raise NotImplementedError("pipeManager.add_cpp_compute_node is not faked")

    def close(self) -> None:
        self.closed = True
        self.queue.clear()
        by_address.pop(self.address, None)


def _status_call(name: str, needs: str | None):
    def call(self, *args) -> mpt.status:
        return self._call(name, needs)

    call.__name__ = name
    return call


for _name, _needs in (("mediaMemAlloc", "acquireDevice"), ("initializeHostBuffer", "mediaMemAlloc"),
                      ("startPipelineExecutor", "initializeHostBuffer"), ("stopPipelineExecutor", None),
                      ("freeHostBuffer", None), ("mediaMemDealloc", None), ("decoderMemDealloc", None)):
    setattr(pipeManager, _name, _status_call(_name, _needs))

