"""Fake of Habana's `media_pipe_types` (pybind11): the enums and the device handle the media loader passes down.

pybind11 enums compare equal only to members of their own type (never to ints), convert with int(),
and are built from an int or a member; `enum.Enum` with __int__/__index__ behaves the same.
"""

from __future__ import annotations

import enum


class _PybindEnum(enum.Enum):
    def __int__(self) -> int:
        return self.value

    __index__ = __int__

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class dType(_PybindEnum):
    NA = 0
    UINT8 = 1
    UINT16 = 2
    UINT32 = 3
    UINT64 = 4
    INT8 = 5
    INT16 = 6
    INT32 = 7
    INT64 = 8
    FLOAT16 = 9
    BFLOAT16 = 10
    FLOAT32 = 11
    FLOAT64 = 12
    STRING = 13


class status(_PybindEnum):
    SUCCESS = 0
    FAILURE = 1
    INVALID_ARGUMENT = 2
    NOT_SUPPORTED = 3
    DEVICE_NOT_FOUND = 4


class mediaPlaceholderType(_PybindEnum):
    CONST_PLACEHOLDER = 0
    NON_CONST_PLACEHOLDER = 1


class mediaInputType(_PybindEnum):
    FILE_LIST = 0
    BUFFER_LIST = 1
    ADDRESS_LIST = 2


class MediaPictureFormat(_PybindEnum):
    MEDIA_IN_NV12 = 0
    MEDIA_OUT_RGB_INTERLEAVED = 1
    MEDIA_OUT_RGB_PLANAR = 2


class RandomCropType(_PybindEnum):
    NO_RANDOM_CROP = 0
    RANDOMIZED_AREA_AND_ASPECT_RATIO_CROP = 1
    RANDOMIZED_ASPECT_RATIO_CROP = 2
    CENTER_CROP = 3


class DecoderType(_PybindEnum):
    IMAGE_DECODER = 0
    VIDEO_DECODER = 1


class DecoderStage(_PybindEnum):
    ENABLE_ALL_STAGES = 0
    ENABLE_SINGLE_STAGE = 1
    ENABLE_TWO_STAGES = 2


class device:
    """The device handle acquireDevice takes, built from mediaPipeGetDeviceTypeId's id."""

    def __init__(self, type_id: int):
        if not isinstance(type_id, int) or isinstance(type_id, bool):
            raise TypeError(f"device(): incompatible constructor arguments; got {type(type_id).__name__}")
        self.type_id = type_id
