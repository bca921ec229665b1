"""Where a machine's CPU goes while a command runs, by kind of process (training, servers, Ray, test workers ...).

    python3 scripts/cpu_by_process.py -- make test

pytest's CPU lists count a test's own process and the subprocesses it waited for; this counts every process on
the machine, daemons included (tracking servers, Ray, PostgreSQL), by polling /proc once a second. A process that
ends between two polls loses at most its last second. Stdlib only: it runs beside any venv.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
# the first match names the process: the more specific words first (a server's arguments may hold a test's path)
KINDS = (
    ("mlflow server", "mlflow server"), ("uvicorn", "mlflow server"), ("gunicorn", "mlflow server"),
    ("huey", "mlflow server"), ("mlflow run", "mlflow run"), ("mlflow models", "mlflow models"),
    ("device-check", "device check"), ("device_check", "device check"), ("benchmarks/", "benchmark"),
    ("bridgetower-mlflow train", "train"), ("bridgetower_mlflow train", "train"), ("entrypoints/train", "train"),
    ("bridgetower-mlflow sweep", "sweep"), ("entrypoints/sweep", "sweep"), ("bridgetower-mlflow", "other command"),
    ("entrypoints/", "other command"), ("torchrun", "torchrun"), ("mpirun", "mpirun"),
    ("raylet", "ray"), ("gcs_server", "ray"), ("ray/", "ray"), ("ray::", "ray"), ("postgres", "postgresql"),
    ("chrom", "chromium"), ("pip install", "pip"), ("mypy", "lint"), ("ruff", "lint"), ("lint-imports", "lint"),
    ("exec(eval(sys.stdin.readline()))", "pytest worker"), ("pytest", "pytest"),
)


def kind(args: str) -> str:
    return next((name for word, name in KINDS if word in args), "other")


def _processes() -> dict[tuple[str, str], tuple[float, str]]:
    """(pid, start time) -> (CPU seconds so far, process's own arguments)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                args = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError):
            continue
        found[(pid, fields[19])] = ((int(fields[11]) + int(fields[12])) / HZ, args)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    command = parser.parse_args().command
    command = command[1:] if command[:1] == ["--"] else command
    before = {key: cpu for key, (cpu, _) in _processes().items()}  # what ran already is not the command's
    totals: collections.Counter[str] = collections.Counter()
    last = dict(before)
    started = time.monotonic()
    child = subprocess.Popen(command)
    signal.signal(signal.SIGTERM, lambda number, _frame: child.send_signal(number))  # a CI's stop reaches make
    while child.poll() is None:
        now = _processes()
        for key, (cpu, args) in now.items():
            totals[kind(args)] += cpu - last.get(key, 0.0)
        last = {key: cpu for key, (cpu, _) in now.items()}
        time.sleep(1)
    wall = time.monotonic() - started
    total = sum(totals.values())
    print(f"\n== CPU by kind of process: {total:.0f} CPU-s in {wall:.0f} s ({total / wall:.2f} cores busy on "
          f"average, of {os.cpu_count()})", file=sys.stderr)
    for name, seconds in totals.most_common():
        print(f"{seconds:8.0f} s  {100 * seconds / max(total, 1e-9):5.1f} %  {name}", file=sys.stderr)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
