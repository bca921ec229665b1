"""What the Trainer measures of itself for the callbacks built before it: its train loader's figures (the loader
attaches itself when the Trainer builds it) and the spans of its own evaluations and checkpoint saves."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .loader_wait import TimedLoader


class SpanClock:
    """The spans of one kind of call, outermost only (GaudiTrainer's call of transformers' is one span).

    `listeners` are called with True as an outermost span opens and False as it closes (the energy window pauses
    across evaluations)."""

    def __init__(self) -> None:
        self._spans: list[tuple[float, float]] = []
        self._depth = 0
        self.listeners: list[Callable[[bool], None]] = []

    @contextmanager
    def timing(self) -> Iterator[None]:
        self._depth += 1
        if self._depth == 1:
            for listener in self.listeners:
                listener(True)
        started = time.perf_counter()
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._spans.append((started, time.perf_counter()))
                for listener in self.listeners:
                    listener(False)

    @property
    def spans(self) -> tuple[tuple[float, float], ...]:
        """(start, end) of every closed outermost span, in order."""
        return tuple(self._spans)

    def seconds_within(self, start: float, end: float) -> float:
        """Seconds of the spans that lie wholly inside [start, end]."""
        return sum(b - a for a, b in self._spans if a >= start and b <= end)


class TrainerMeter:
    """The train loader's figures (attached: False until the Trainer builds that loader, and for a callback driven
    without one), and the Trainer's evaluations and saves, timed around its own calls: what other callbacks do
    around them (persisting the metric queue before a checkpoint, a printer) is neither."""

    def __init__(self) -> None:
        self._loader: TimedLoader | None = None
        self.evaluations = SpanClock()
        self.saves = SpanClock()

    def attach(self, loader: TimedLoader) -> None:
        self._loader = loader

    @property
    def attached(self) -> bool:
        return self._loader is not None

    @property
    def wait_seconds(self) -> float:
        """Seconds the step loop has blocked on the loader so far."""
        return self._loader.wait_seconds if self._loader is not None else 0.0

    @property
    def rows(self) -> int:
        """Rows of the batches handed to the step loop so far."""
        return self._loader.delivered.samples if self._loader is not None else 0

    def close(self) -> None:
        """End the loader's pass in progress (its workers go)."""
        if self._loader is not None:
            self._loader.close()
