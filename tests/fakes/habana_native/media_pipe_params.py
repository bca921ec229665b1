"""Fake of Habana's `media_pipe_params` (pybind11): the C structs the legacy pipe fills in.

Fields behave as pybind11 def_readwrite members: unknown names raise AttributeError, an int field
refuses a float (pybind11 does not narrow), fixed arrays are numpy views written in place, nested
structs are returned by reference. Only the structs the BridgeTower graph needs are real; the other
operators' structs exist (the schemas name them at import) and refuse to be built.
"""

from __future__ import annotations

import numbers

import media_pipe_types as mpt
import numpy as np

MAX_DIMENSIONS_NUM = 5


class Field:
    """A typed struct member: int, float, str, an enum class, a struct class, or ('array', length)."""

    def __init__(self, kind, default=None):
        self.kind, self.default = kind, default

    def __set_name__(self, owner, name):
        self.name = name

    def fresh(self):
        if isinstance(self.kind, tuple):
            return np.zeros(self.kind[1], dtype=np.uint64)
        if isinstance(self.kind, type) and issubclass(self.kind, Struct):
            return self.kind()
        return self.default

    def __get__(self, obj, owner=None):
        return self if obj is None else obj._values[self.name]

    def __set__(self, obj, value):
        obj._values[self.name] = convert(self.kind, value, f"{type(obj).__name__}.{self.name}")


def convert(kind, value, where: str):
    if isinstance(kind, tuple):
        raise AttributeError(f"{where}: a fixed array; assign its elements")
    numeric = {int: numbers.Integral, float: numbers.Real}.get(kind)
    if not isinstance(value, numeric or kind):
        raise TypeError(f"{where}: incompatible value {value!r} ({type(value).__name__}); expected {kind.__name__}")
    return kind(value) if numeric else value


class Struct:
    __slots__ = ("_values",)

    def __init__(self):
        self._values = {name: field.fresh() for name, field in self.fields().items()}

    @classmethod
    def fields(cls) -> dict:
        found = {}
        for klass in reversed(cls.__mro__):
            found.update({k: v for k, v in vars(klass).items() if isinstance(v, Field)})
        return found

    def as_dict(self) -> dict:
        out = {}
        for name in self.fields():
            value = getattr(self, name)
            out[name] = value.as_dict() if isinstance(value, Struct) else value.tolist() \
                if isinstance(value, np.ndarray) else value
        return out


class mediaShape(Struct):
    __slots__ = ()
    numDims = Field(int, 0)
    dims = Field(("array", MAX_DIMENSIONS_NUM))


class mediaOutput(Struct):
    __slots__ = ()
    outputType = Field(mpt.dType, mpt.dType.UINT8)
    outputZp = Field(float, 0.0)
    outputScale = Field(float, 1.0)


class mediaPlaceholderParams(Struct):
    __slots__ = ()
    shape = Field(mediaShape)
    output = Field(mediaOutput)
    layout = Field(str, "")
    type = Field(mpt.mediaPlaceholderType, mpt.mediaPlaceholderType.NON_CONST_PLACEHOLDER)
    dataPtr = Field(int, 0)


class cmnParams(Struct):
    __slots__ = ()
    mirror = Field(int, 0)
    crop_w = Field(int, 0)
    crop_h = Field(int, 0)
    crop_d = Field(int, 0)
    crop_pos_x = Field(float, 0.0)
    crop_pos_y = Field(float, 0.0)
    crop_pos_z = Field(float, 0.0)
    pad_val = Field(int, 0)


class cropMirrorNormParams(Struct):
    __slots__ = ()
    params = Field(cmnParams)
    output = Field(mediaOutput)


NP_DTYPES = {mpt.dType.UINT8: np.uint8, mpt.dType.UINT16: np.uint16, mpt.dType.UINT32: np.uint32,
             mpt.dType.UINT64: np.uint64, mpt.dType.INT8: np.int8, mpt.dType.INT16: np.int16,
             mpt.dType.INT32: np.int32, mpt.dType.INT64: np.int64, mpt.dType.FLOAT16: np.float16,
             mpt.dType.FLOAT32: np.float32, mpt.dType.FLOAT64: np.float64}


def expect(value, kind, where: str):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{where}(): incompatible function arguments ({type(value).__name__}, expected {kind})")


def dims_of(shape) -> list[int]:
    return [int(d) for d in shape.dims[:shape.numDims]]


def c_array(address: int, count: int, dtype):
    ctype = np.ctypeslib.as_ctypes_type(NP_DTYPES[dtype])
    return (ctype * count).from_address(address)


def _unfaked(name: str) -> type:
    def refuse(self, *args, **kwargs):
        raise NotImplementedError(f"media_pipe_params.{name} is not faked: the fake natives run the "
                                  "ImageDecoder -> CropMirrorNorm graph only")

    return type(name, (), {"__init__": refuse})


for _name in ("resizeParams", "colorSpaceConversionParams", "cropParams", "mediaReshapeNdParams", "contrastParams",
              "brightnessParams", "saturationParams", "mediaTransposeParams", "mediaSliceParams", "mediaConcatParams",
              "mediaSplitParams", "mediaConstantParams", "mediaCopyParams", "mediaCastParams", "bitwiseBinaryParams",
              "mediaGatherParams", "mediaArithmeticParams", "flipParams", "mediaRandomBernoulliParams",
              "mediaRandomUniformParams", "normalizeParams", "hueParams", "mediaRotateParams",
              "FrameRateReductionParams", "mediaPadParams", "mediaClampParams", "mediaRandomNormalParams",
              "mediaConvolutionParams", "mediaReduceParams", "mediaGaussianBlurParams"):
    globals()[_name] = _unfaked(_name)
