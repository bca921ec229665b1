"""Fake of the bridge's native `_hpu_C`: device init, and the HPU allocator behind torch.empty(device="hpu").

init() raises as the real one does when no device is found (FAKE_HPU_COUNT=0). Once the device is up,
torch's HPU dispatch key gets an `empty` kernel, so framework code that allocates device tensors
(habana's PytorchDevice for the media pipe) gets tensors whose memory the fake media device writes;
they live in host memory. Registered at init, not import, so tests that never start a device keep a
torch without HPU kernels.
"""

import os
import warnings

import torch

from habana_frameworks._record import record

_allocator = None


def device_count() -> int:
    return int(os.environ.get("FAKE_HPU_COUNT", "8"))


def init() -> None:
    global _allocator
    if device_count() == 0:
        raise RuntimeError("synStatus=8 [Device not found] Device acquire failed.")
    if _allocator is None:
        _allocator = torch.library.Library("aten", "IMPL", "HPU")
        with warnings.catch_warnings():  # "overriding a previously registered kernel": the backend-select default
            warnings.simplefilter("ignore")
            _allocator.impl("empty.memory_format", _empty)
        record("hpu_init", count=device_count())


_lazy_init = init  # what torch calls (torch.hpu._lazy_init) before its first HPU allocation


def _empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return torch.empty(size, dtype=dtype)
