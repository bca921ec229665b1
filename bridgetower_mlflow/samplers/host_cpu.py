"""CPU of the training process and of its data-loader workers (100 % = one core busy).

On Linux a sample is a few small /proc reads: the process's stat file, its threads' children lists
and each live worker's stat file. psutil's `children()` reads the stat file of every process on the
host instead (2-3 ms a sample on a 100-process machine, four times this, more on a big shared host);
it stays the way where the kernel has no children lists (other systems, kernels built without them).
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class TreeCpu(NamedTuple):
    """Cumulative CPU seconds: the process (every thread), its descendants (live and finished); live ones."""

    main: float
    workers: float
    live: int


def _times(pid: int) -> tuple[float, float]:
    """(own CPU s, CPU s of its finished and reaped children) from /proc/<pid>/stat (fields 14-17)."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
        text = handle.read()
    fields = text[text.rindex(")") + 2:].split()  # after "(comm)": [0] is field 3
    return (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK


def _children(pid: int) -> list[int]:
    """Live children of every thread of `pid` (a worker is the child of the thread that started it)."""
    found: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as handle:
                found.extend(int(child) for child in handle.read().split())
        except OSError:  # the thread ended meanwhile
            continue
    return found


def proc_tree_cpu(pid: int) -> TreeCpu:
    """From /proc. Workers are listed before the parent's counters are read, so one that ends meanwhile is
    counted at most once (in the parent's reaped total, or on the next sample), never twice."""
    listed, queue = [], [pid]
    while queue:
        children = _children(queue.pop())
        listed.extend(children)
        queue.extend(children)
    main, workers = _times(pid)
    live = 0
    for child in listed:
        try:
            own, reaped = _times(child)
        except (OSError, ValueError):  # ended and reaped since it was listed
            continue
        workers, live = workers + own + reaped, live + 1
    return TreeCpu(main, workers, live)


def psutil_tree_cpu(process) -> TreeCpu:
    """The same through psutil (every process of the host is read to find the children)."""
    import psutil

    times = process.cpu_times()
    workers, live = times.children_user + times.children_system, 0
    for child in process.children(recursive=True):
        try:
            child_times = child.cpu_times()
        except psutil.Error:
            continue
        workers += child_times.user + child_times.system
        live += 1
    return TreeCpu(times.user + times.system, workers, live)


class HostCpuSampler:
    """main_process_cpu_percentage, dataloader_workers_cpu_percentage and _count, process_cpu_percentage.

    Over one training process or several (every rank of a node, each with its own workers): summed.
    """

    def __init__(self, *pids: int):
        self.pids = pids or (os.getpid(),)
        self.peak_workers = 0
        self._processes: dict[int, object] = {}
        self._seen: dict[int, TreeCpu] = {}  # last reading per process: one that ended keeps its CPU seconds
        self._last: tuple[float, float, float] | None = None  # (monotonic s, main CPU s, workers CPU s) last sample
        if not os.path.exists(f"/proc/{self.pids[0]}/task/{self.pids[0]}/children"):
            import psutil

            self._processes = {pid: psutil.Process(pid) for pid in self.pids}

    def cpu_seconds(self) -> TreeCpu:
        """Cumulative. Workers restart every epoch unless persistent: the finished ones are counted through
        the parent's reaped-children times, the live ones through their own."""
        main = workers = 0.0
        live = 0
        for pid in self.pids:
            try:
                found = psutil_tree_cpu(self._processes[pid]) if self._processes else proc_tree_cpu(pid)
            except Exception:  # a rank that ended before this one: its seconds stay counted
                if len(self.pids) == 1 or pid not in self._seen:
                    raise
                found = self._seen[pid]._replace(live=0)
            self._seen[pid] = found
            main, workers, live = main + found.main, workers + found.workers, live + found.live
        return TreeCpu(main, workers, live)

    def _reading(self) -> tuple[float, float, float]:
        main, workers, _ = self.cpu_seconds()
        return time.monotonic(), main, workers

    def start(self) -> None:
        self._last = self._reading()

    def sample(self) -> dict[str, float]:
        if self._last is None:
            self._last = self._reading()  # as start() does
        now = time.monotonic()
        main, workers, count = self.cpu_seconds()
        last_t, last_main, last_workers = self._last
        elapsed = max(now - last_t, 1e-6)
        self._last = (now, max(main, last_main), max(workers, last_workers))
        self.peak_workers = max(self.peak_workers, count)
        main_pct = 100.0 * max(0.0, main - last_main) / elapsed
        workers_pct = 100.0 * max(0.0, workers - last_workers) / elapsed
        return {
            "main_process_cpu_percentage": main_pct,
            "dataloader_workers_cpu_percentage": workers_pct,
            "dataloader_workers_count": float(count),
            "process_cpu_percentage": main_pct + workers_pct,
        }

    def stop(self) -> None:
        pass
