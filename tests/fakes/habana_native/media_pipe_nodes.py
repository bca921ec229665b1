"""Fake of Habana's `media_pipe_nodes` (pybind11): the names the mediapipe schemas take at import.

These belong to the cpu/mixed graph (GraphHandler); the legacy pipe this project runs never builds
them, so each refuses to be built rather than pretend.
"""

from __future__ import annotations

from media_pipe_types import _PybindEnum


class Device_t(_PybindEnum):
    DEVICE_CPU = 0
    DEVICE_HPU = 1
    DEVICE_CPU_HPU = 2


class NodeType_t(_PybindEnum):
    NODE_INPUT = 0
    NODE_READER = 1
    NODE_CONSTANT = 2
    NODE_DUMMY = 3
    NODE_OPERATOR = 4
    NODE_DECODER = 5


class ExecType_t(_PybindEnum):
    EXEC_BATCHED = 0
    EXEC_NON_BATCHED = 1


class LastBatchStrategy_t(_PybindEnum):
    LBS_NONE = 0
    LBS_DROP = 1
    LBS_PAD = 2
    LBS_CYCLIC = 3


class DSCombination_t(_PybindEnum):
    DS_SLICE_SHUFFLE_ROUND = 0
    DS_SHUFFLE_SLICE_ROUND = 1


def _unfaked(name: str) -> type:
    def refuse(self, *args, **kwargs):
        raise NotImplementedError(f"media_pipe_nodes.{name} is not faked: only the legacy pipe is")

    return type(name, (), {"__init__": refuse})


for _name in ("OpNode", "TensorNode", "GraphHandler", "tensor_node_list", "TensorCPU", "MediaPyReader", "MediaPyOp",
              "EmptyParams_t", "PyReaderParams_t", "NumpyReaderParams_t", "FileReaderParams_t", "CocoParams_t",
              "RBCParams_t", "RandomBernoulliParams_t", "RandomUniformParams_t", "RandomNormalParams_t",
              "RandomFlipParams_t", "CropParams_t", "ConstantParams_t", "GaussianFilterParams_t",
              "MediaConstantParams_t", "MediaFuncParams_t", "SSDCropWindowGenParams_t", "ModuloParams_t",
              "CropWindowGeneratorParams_t", "ReshapeParams_t", "FileLoaderParams_t", "ImageDecoderParams_t"):
    globals()[_name] = _unfaked(_name)
