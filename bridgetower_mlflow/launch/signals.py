"""SIGTERM (schedulers, Kubernetes, Ray) and SIGINT (Ctrl-C) as one interrupt that unwinds the flow."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(KeyboardInterrupt):
    """Raised in the main thread by a stop signal; a KeyboardInterrupt, so no `except Exception` swallows it."""

    def __init__(self, signum: int, step: int | None = None, run_id: str | None = None) -> None:
        self.signum, self.signal_name = signum, signal.Signals(signum).name
        self.step = step  # the optimizer step training had reached, when it had started
        self.run_id = run_id  # the run it ended
        super().__init__(f"stopped by {self.signal_name}")

    def at(self, step: int | None = None, run_id: str | None = None) -> Stopped:
        """The same stop, raised again by a layer that knows more: where training was, which run it ended."""
        return Stopped(self.signum, self.step if step is None else step, self.run_id if run_id is None else run_id)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # what a shell reports for a process the signal ended


@contextlib.contextmanager
def stop_signals_raise() -> Iterator[None]:
    """Inside: the first SIGTERM or SIGINT raises Stopped; a second SIGINT interrupts the cleanup, SIGTERM waits."""

    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the grace period is for cleanup; SIGKILL ends it
        raise Stopped(signum)

    try:
        previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    except ValueError:  # not the main thread: signals are not ours to take
        previous = {}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
