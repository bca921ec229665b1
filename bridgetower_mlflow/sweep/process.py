"""Runs one `train` process to its end, and never leaves it (or what it started) behind."""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path

POLL_SECONDS = 0.5
STOP_GRACE_SECONDS = 5.0


def run_train_process(command: list[str], env: dict, log, cwd: str | None = None) -> int:
    """Run `command` (in `cwd`) with output to `log`; return its exit status (-N when killed by signal N).

    Whatever ends this call early (Ctrl-C, Ray's cancel) also stops train and its children.
    """
    # Same process group as the caller: a Ray worker killed with its group takes train along.
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
    try:
        while True:
            try:
                return process.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                # Short waits, not one blocking wait: Ray's soft cancel raises KeyboardInterrupt in this
                # thread only between bytecodes.
                continue
    finally:
        stop_tree(process)


def stop_tree(process: subprocess.Popen, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM train and its descendants, SIGKILL what is left after `grace` seconds."""
    if process.poll() is not None:
        return
    # Listed before the first signal: once train dies its children are re-parented and unfindable.
    tree = [process.pid, *descendants(process.pid)]
    _signal_all(tree, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
        tree = tree[1:]  # reaped: its pid is no longer ours to signal
    except subprocess.TimeoutExpired:
        pass
    _signal_all(tree, signal.SIGKILL)
    process.wait()


def descendants(root: int) -> list[int]:
    """Live descendants of `root`, read from /proc (empty where there is no /proc)."""
    parent_of = {}
    for entry in os.listdir("/proc") if Path("/proc").is_dir() else ():
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parent_of[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # the process ended while we looked
    found, frontier = [], {root}
    while frontier:
        children = {pid for pid, parent in parent_of.items() if parent in frontier}
        found += sorted(children)
        frontier = children
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def exit_reason(returncode: int | None) -> str:
    """`train exited with 3` / `train was killed by SIGKILL (exit -9)`."""
    if returncode is None:
        return "train did not report an exit status"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"train was killed by {name} (exit {returncode})"
    return f"train exited with {returncode}"


@contextmanager
def sigterm_as_interrupt():
    """`kill`, `timeout` and `mlflow run`'s cancel send SIGTERM: end the sweep as Ctrl-C does (runs KILLED)."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: signals are not ours to take
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
