"""Tracking threads say their name where the kernel shows it (top -H, ps -L, /proc). Stdlib only.

They keep training's priority on purpose. Raised to nice +10 they saved nothing measurable (they need well
under 1 % of a core) but, on a saturated host, waited in the run queue every time they took the GIL back;
holding the GIL while the scheduler kept them off the CPU, they also stalled the training thread. Side by side
under load (benchmarks/bench_monitor_priority.py) a nice +10 monitor took ~25x longer per sample, seconds at
worst: the holes a fresh-clone CI saw in `system/` series during a server outage.
"""

from __future__ import annotations

import threading

KERNEL_NAME_BYTES = 15  # /proc/<pid>/task/<tid>/comm (TASK_COMM_LEN - 1)


def name_this_thread() -> None:
    """The calling thread's Python name as its kernel name, cut to 15 bytes (where there is no /proc: nothing)."""
    name = threading.current_thread().name.encode("utf-8", "replace")[:KERNEL_NAME_BYTES]
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "wb") as handle:
            handle.write(name)
    except OSError:  # no /proc (or read-only): only the name is lost
        pass
