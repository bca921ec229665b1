"""Time spent waiting for the next batch, measured on the host around `next()` only, and the batches handed on.

No device synchronization is added: the wait is what the training loop itself sees, and a batch's rows are
read from a tensor's shape (metadata), never from its values.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import DataError


def rows_in(batch: Any) -> int:
    """Rows of one batch: the first dimension of its first tensor (a collated dict, or a tuple of tensors)."""
    values = batch.values() if isinstance(batch, Mapping) else batch if isinstance(batch, Sequence) else (batch,)
    for value in values:
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
    raise TypeError(f"a batch without a tensor to count rows in ({type(batch).__name__})")


class BatchCount:
    """Batches and rows handed to the step loop, counted as they are handed on (the loop runs each one)."""

    def __init__(self) -> None:
        self.batches = 0
        self.samples = 0

    def add(self, batch: Any) -> None:
        self.batches += 1
        self.samples += rows_in(batch)


class TimedLoader:
    """Wraps a DataLoader; counts seconds blocked in `next()` and surfaces decode errors.

    `delivered` counts the batches the step loop received: this loader's own batches, unless an outer
    loader that hands them on (train.loaders.ResumingLoader, past accelerate's one-batch read-ahead and a
    resume's skip) shares its count instead.
    """

    def __init__(self, loader, length: int | None = None, delivered: BatchCount | None = None):
        self._loader = loader
        self._length = length
        self._counts_own = delivered is None
        self.delivered = delivered if delivered is not None else BatchCount()
        self.wait_seconds = 0.0
        self.batches = 0
        self._pass = None  # the pass in progress: `close` ends it

    def __len__(self):
        return self._length if self._length is not None else len(self._loader)

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def close(self) -> None:
        """End the pass in progress (a run stopped mid-epoch): the loader lets its workers go now."""
        if self._pass is not None:
            self._pass.close()
            self._pass = None

    def __iter__(self):
        self._pass = self._batches()
        return self._pass

    def _batches(self):
        iterator = iter(self._loader)
        while True:
            started = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:  # the epoch's end blocks the loop too (workers are joined before it is raised)
                self.wait_seconds += time.perf_counter() - started
                return
            self.wait_seconds += time.perf_counter() - started
            self.batches += 1
            if isinstance(batch, dict) and batch.get("image_errors"):
                errors = batch["image_errors"]
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                raise DataError(f"dataset: {errors[0]}{more}; allowed: readable JPEG/PNG images")
            if self._counts_own:
                self.delivered.add(batch)
            yield batch
