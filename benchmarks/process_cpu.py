"""CPU time of this process tree and of each of its threads, read from /proc (Linux only).

`snapshot()` is taken from inside the training process at the two instants of the throughput window;
`difference(a, b)` is what was spent between them. Threads are named by their Python name where
Python knows the thread (`Thread.native_id`), else by their kernel name (`comm`): torch's OpenMP pool,
for instance. Threads are keyed by native id, so a name shared by several threads is summed.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Snapshot:
    wall: float
    main: float  # this process, every thread (dead ones included), seconds
    workers: float  # every descendant process, live or reaped, seconds
    threads: dict[int, tuple[str, float]] = field(default_factory=dict)  # tid -> (name, seconds)

    @property
    def tree(self) -> float:
        return self.main + self.workers


def _stat_fields(path: str) -> list[str]:
    """The fields after `(comm)` of a /proc stat file: [0] is field 3 (state)."""
    with open(path, encoding="ascii", errors="replace") as handle:
        text = handle.read()
    return text[text.rindex(")") + 2:].split()


def stat_seconds(path: str, with_children: bool = False) -> float:
    rest = _stat_fields(path)
    ticks = int(rest[11]) + int(rest[12]) + (int(rest[13]) + int(rest[14]) if with_children else 0)
    return ticks / TICK


def nice(path: str) -> int:
    """The nice value of a task (field 19 of its stat file)."""
    return int(_stat_fields(path)[16])


def thread_seconds(task: str) -> float:
    """A thread's CPU time: schedstat's nanoseconds where the kernel has it, else stat's ticks."""
    try:
        with open(f"{task}/schedstat", encoding="ascii") as handle:
            return int(handle.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return stat_seconds(f"{task}/stat")


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (children of any of its threads, then theirs)."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", encoding="ascii") as handle:
                    children = [int(c) for c in handle.read().split()]
            except OSError:
                continue
            found.extend(children)
            queue.extend(children)
    return found


def _workers_seconds() -> float:
    """Reaped descendants (os.times) plus live ones; read until no child was reaped meanwhile."""
    for _ in range(5):
        times = os.times()
        reaped = times.children_user + times.children_system
        live = 0.0
        for pid in descendants(os.getpid()):
            try:
                live += stat_seconds(f"/proc/{pid}/stat", with_children=True)
            except (OSError, ValueError):
                continue
        again = os.times()
        if again.children_user + again.children_system == reaped:
            return reaped + live
    return reaped + live


def snapshot() -> Snapshot:
    names = {t.native_id: t.name for t in threading.enumerate()}
    threads = {}
    for entry in os.listdir("/proc/self/task"):
        tid, task = int(entry), f"/proc/self/task/{entry}"
        try:
            seconds = thread_seconds(task)
            if tid not in names:
                with open(f"{task}/comm", encoding="ascii", errors="replace") as handle:
                    names[tid] = "native: " + handle.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
        threads[tid] = (names[tid], seconds)
    return Snapshot(time.monotonic(), time.process_time(), _workers_seconds(), threads)


def thread_nices() -> dict[str, int]:
    """{Python thread name: its nice value} for this process's live Python threads."""
    found = {}
    for thread in threading.enumerate():
        try:
            found[thread.name] = nice(f"/proc/self/task/{thread.native_id}/stat")
        except OSError:
            continue
    return found


def difference(start: Snapshot, end: Snapshot) -> dict:
    """{'wall', 'main', 'workers', 'tree', 'threads': {name: seconds}} spent between two snapshots."""
    by_name: dict[str, float] = {}
    for tid, (name, seconds) in end.threads.items():
        before = start.threads.get(tid)
        spent = seconds - before[1] if before else seconds  # a thread started inside the window
        by_name[name] = by_name.get(name, 0.0) + spent
    return {"wall": end.wall - start.wall, "main": end.main - start.main, "workers": end.workers - start.workers,
            "tree": end.tree - start.tree, "threads": by_name}
