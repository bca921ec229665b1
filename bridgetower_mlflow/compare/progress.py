"""Progress of a long read on stderr: a line per page once the runs fill more than one page."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

PROGRESS_INTERVAL_S = 2.0  # at most one line this often, so a fast store does not flood the terminal


class ReadProgress:
    """Counts the runs compare reads, page by page; silent while everything fits in one page.

    stdout carries the report, so the lines go to `stream` (stderr unless given).
    """

    def __init__(self, stream: TextIO | None = None, interval: float = PROGRESS_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._stream, self._interval, self._clock = stream, interval, clock
        self._started = clock()
        self._last: float | None = None
        self.runs = 0
        self.pages = 0

    def page(self, runs: int, more: bool) -> None:
        """One page of `runs` was read; `more` when the search has another page."""
        self.runs += runs
        self.pages += 1
        if not (more or self._last is not None):
            return  # a single-page read stays silent
        now = self._clock()
        if self._last is None or now - self._last >= self._interval:
            self._last = now
            self._write(f"compare: read {self.runs} runs so far (page {self.pages}, more to come)...")

    def done(self) -> None:
        """The closing line, only when progress was shown."""
        if self._last is not None:
            self._write(f"compare: read {self.runs} runs in {self.pages} pages "
                        f"({self._clock() - self._started:.1f} s)")

    def _write(self, line: str) -> None:
        stream = self._stream or sys.stderr  # looked up late: a test runner swaps sys.stderr
        stream.write(line + "\n")
        stream.flush()
