"""Time spent waiting for the next batch, measured on the host around `next()` only.

No device synchronization is added: the wait is what the training loop itself sees.
"""

from __future__ import annotations

import time

from ..errors import DataError


class TimedLoader:
    """Wraps a DataLoader; counts seconds blocked in `next()` and surfaces decode errors."""

    def __init__(self, loader, length: int | None = None):
        self._loader = loader
        self._length = length
        self.wait_seconds = 0.0
        self.batches = 0

    def __len__(self):
        return self._length if self._length is not None else len(self._loader)

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def __iter__(self):
        iterator = iter(self._loader)
        while True:
            started = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            self.wait_seconds += time.perf_counter() - started
            self.batches += 1
            if isinstance(batch, dict) and batch.get("image_errors"):
                errors = batch["image_errors"]
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                raise DataError(f"dataset: {errors[0]}{more}; allowed: readable JPEG/PNG images")
            yield batch

