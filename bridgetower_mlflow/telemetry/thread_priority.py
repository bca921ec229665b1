"""Tracking threads step back: a higher nice value than training, and their name where the kernel shows it.

Stdlib only. Called first thing inside a tracking thread (the system monitor, the run buffer's sender):
on a saturated host the scheduler then serves the training threads and the data-loader workers first,
and the tracking work waits its turn (it needs well under 1 % of a core). Linux keeps one nice value
per thread, so nothing else of the process moves; elsewhere both calls do nothing.
"""

from __future__ import annotations

import os
import sys
import threading

BACKGROUND_NICENESS = 10  # nice +10: ~1/10 of a nice-0 thread's share when they compete for a core
KERNEL_NAME_BYTES = 15  # /proc/<pid>/task/<tid>/comm (TASK_COMM_LEN - 1)


def lower_this_thread_priority(increment: int = BACKGROUND_NICENESS) -> None:
    """The calling thread's nice value `increment` above the main thread's (at most 19; never raises its
    priority, so a second call changes nothing), and its Python name given to the kernel."""
    if not sys.platform.startswith("linux"):
        return  # elsewhere PRIO_PROCESS with a thread id would name some process, not this thread
    tid = threading.get_native_id()
    try:
        target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + increment)  # pid = the main thread's id
        if os.getpriority(os.PRIO_PROCESS, tid) < target:
            os.setpriority(os.PRIO_PROCESS, tid, target)
    except OSError:  # a sandbox that forbids it: the thread runs on at its priority
        pass
    name_this_thread()


def name_this_thread() -> None:
    """The calling thread's Python name as its kernel name (top -H, ps -L, /proc), cut to 15 bytes."""
    name = threading.current_thread().name.encode("utf-8", "replace")[:KERNEL_NAME_BYTES]
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "wb") as handle:
            handle.write(name)
    except OSError:  # no /proc (or read-only): only the name is lost
        pass
