"""Fake of Habana's `media_pipe_proxy` (pybind11): framework types and the C handle of a Python framework proxy.

mediaPythonFwProxy_init keeps the seven callbacks the C side calls (allocate and free device tensors
and buffers, get and release the device id, the compute stream) and returns an address-like int,
as the real one returns a C pointer.
"""

from __future__ import annotations

import itertools

from media_pipe_types import _PybindEnum


class fwType(_PybindEnum):
    SYNAPSE_FW = 0
    TF_FW = 1
    PYTHON_FW = 2
    PYT_FW = 3
    PYTHON_PYT_FW = 4


CALLBACKS = ("new_tensor_dataptr", "delete_tensor", "new_buffer", "delete_buffer", "get_device_id",
             "release_device_id", "get_compute_stream")
proxies: dict[int, dict] = {}
_addresses = itertools.count(0x7F0000001000, 0x40)


def mediaPythonFwProxy_init(*callbacks) -> int:
    if len(callbacks) != len(CALLBACKS) or not all(callable(c) for c in callbacks):
        raise TypeError(f"mediaPythonFwProxy_init(): expects {len(CALLBACKS)} callables")
    address = next(_addresses)
    proxies[address] = dict(zip(CALLBACKS, callbacks))
    return address


def mediaPythonFwProxy_del(address: int) -> None:
    proxies.pop(address, None)
