"""Runs one `train` process to its end, and never leaves it (or what it started) behind."""

from __future__ import annotations

import signal
import subprocess

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
    import psutil

    if process.poll() is not None:
        return
    # Listed before the first signal: once train dies its children are re-parented and unfindable.
    try:
        tree = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    process.terminate()
    _signal_all(tree, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
    _signal_all(tree, signal.SIGKILL)
    process.wait()


def _signal_all(processes: list, sig: int) -> None:
    import psutil

    for process in processes:
        try:
            process.send_signal(sig)  # psutil checks it is still the process listed, not a reused pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
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
