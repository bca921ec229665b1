"""What the device really does: a short dense-matmul benchmark at the run's dtype (a few square shapes, the best
rate wins, bounded in time), cached per device name, dtype and software versions in the project's cache folder.

MFU against this rate says how much of the reachable matmul speed the training step uses; against the
data-sheet peak (train_mfu) it mixes that with how far the chip's matmuls fall short of the sheet.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .flops import cache_dir

log = logging.getLogger(__name__)
CACHE_VERSION = "1"
BUDGET_SECONDS = 4.0  # measuring; with the operands' allocation the whole stays under 5 s
SIZES = (1024, 2048, 4096, 8192, 16384)
BATCH_SECONDS = 0.05  # matmuls between two synchronizations
SLICE_SECONDS = 0.75  # the most one size is timed


@dataclass(frozen=True)
class MatmulRate:
    """The best measured shape: its size, how many matmuls of it ran, their FLOPs and seconds."""

    size: int
    count: int
    flops: float
    seconds: float

    @property
    def tflops(self) -> float:
        return self.flops / self.seconds / 1e12


def measure_matmul_rate(device: Any, dtype: Any, synchronize: Callable[[], None],
                        budget: float = BUDGET_SECONDS) -> MatmulRate:
    """Square matmuls of growing size on `device`; a size is tried only while its time fits what is left."""
    import torch

    deadline = time.perf_counter() + budget
    best: MatmulRate | None = None
    for size in SIZES:
        flops = 2.0 * size ** 3
        left = deadline - time.perf_counter()
        if best is not None and flops / (best.flops / best.seconds) * 4 > left:  # warm-up and three more
            break
        a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
        out = torch.empty(size, size, device=device, dtype=dtype)
        torch.mm(a, b, out=out)  # warm-up: kernels chosen, caches filled
        synchronize()
        rate = _timed_matmuls(a, b, out, synchronize, time.perf_counter() + min(left / 3, SLICE_SECONDS))
        if best is None or rate.tflops > best.tflops:
            best = rate
        del a, b, out
    assert best is not None
    return best


def _timed_matmuls(a: Any, b: Any, out: Any, synchronize: Callable[[], None], until: float) -> MatmulRate:
    import torch

    size, count, batch = a.shape[0], 0, 1
    started = time.perf_counter()
    while True:
        for _ in range(batch):
            torch.mm(a, b, out=out)
        synchronize()
        count += batch
        now = time.perf_counter()
        if now >= until or count >= 10_000:
            return MatmulRate(size, count, 2.0 * size ** 3 * count, now - started)
        batch = max(1, int(BATCH_SECONDS * count / max(now - started, 1e-9)))


def achievable_tflops(device: Any, precision: str, synchronize: Callable[[], None], device_name: str,
                      software: Mapping[str, str]) -> float:
    """The cached rate for this device name, precision (bf16, fp32, or tf32: fp32 operands on TF32 tensor cores,
    as torch is set) and software; measured once (at most BUDGET_SECONDS)."""
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    text = json.dumps([CACHE_VERSION, device_name, precision, torch.__version__, sorted(software.items())])
    path = cache_dir().parent / "achievable" / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.json"
    if path.exists():
        return float(json.loads(path.read_text())["tflops"])
    rate = measure_matmul_rate(device, dtype, synchronize)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"tflops": rate.tflops, "size": rate.size, "count": rate.count,
                                "seconds": rate.seconds, "device_name": device_name, "precision": precision}))
    return rate.tflops
