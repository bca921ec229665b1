"""The exposed all-reduce of DDP: a comm hook marks when each gradient bucket is ready, then all-reduces it as
DDP's default does (torch's allreduce_hook: divide by the world size, sum).

DDP overlaps a bucket's all-reduce with the backward of the layers before it; backward returns only once
every bucket is reduced. So the time from the last bucket's launch to the end of backward is the all-reduce
the step waits for (the exposed part); what overlapped with backward's compute stays in backward.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def time_all_reduce(model: Any, bucket_ready: Callable[[], None]) -> str:
    """Hook `bucket_ready` into the DDP `model`'s gradient all-reduce; returns "" or why it is not timed."""
    from torch.nn.parallel import DistributedDataParallel

    if not isinstance(model, DistributedDataParallel):
        return "the model is not wrapped in DistributedDataParallel: no gradient all-reduce to time"
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    def timed_allreduce(process_group, bucket):  # unannotated: DDP checks the annotations it finds
        bucket_ready()
        return default_hooks.allreduce_hook(process_group, bucket)

    try:
        model.register_comm_hook(None, timed_allreduce)
    except RuntimeError as exc:  # a comm hook is set already (DDP takes one)
        log.warning("all-reduce not timed: %s", str(exc).splitlines()[0][:200])
        return f"another DDP comm hook is registered ({str(exc).splitlines()[0][:120]}): inside backward"
    return ""
