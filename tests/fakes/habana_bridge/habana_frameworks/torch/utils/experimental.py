"""Fake of habana_frameworks.torch.utils.experimental (bridge natives): what the media iterator calls."""

import torch

COMPUTE_STREAM = 0x5EED0000


def _data_ptr(tensor) -> int:
    """The device address of a tensor's data (here host memory: see _hpu_C's allocator)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"_data_ptr(): incompatible function arguments ({type(tensor).__name__})")
    return tensor.data_ptr()


def _compute_stream() -> int:
    return COMPUTE_STREAM
