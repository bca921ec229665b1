"""The tests that cost the most CPU, beside pytest's slowest wall-clock list.

On two cores the suite is CPU-bound: a test that sleeps for a minute costs the other worker nothing, one that
trains in five subprocesses costs it everything. CPU time here is the test process's own plus that of every
subprocess it waited for (grandchildren included); daemons it left running (a Ray cluster) are not counted.
"""

from __future__ import annotations

import resource
import sys
from collections import Counter
from pathlib import Path

import pytest

SHOWN = 25
FILES_SHOWN = 15  # where a change of a test file's fixtures or servers pays
# every test's cost, beside the lists, for a closer look: one file per venv (the Gaudi stack's run goes beside)
EVERY_TEST = Path("test-artifacts") / f"cpu-seconds-{Path(sys.prefix).name.lstrip('.')}.tsv"
_started: dict[str, float] = {}
_costs: list[tuple[float, str]] = []


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _started[item.nodeid] = _cpu_seconds()  # in the process that runs the test (an xdist worker)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown" and item.nodeid in _started:
        outcome.get_result().user_properties.append(("cpu_s", round(_cpu_seconds() - _started.pop(item.nodeid), 2)))


def pytest_runtest_logreport(report):
    for name, value in report.user_properties:
        if name == "cpu_s":
            _costs.append((value, report.nodeid))


def pytest_terminal_summary(terminalreporter):
    if not _costs:
        return
    total = sum(cost for cost, _ in _costs)
    listing = terminalreporter.config.rootpath / EVERY_TEST
    listing.parent.mkdir(exist_ok=True)
    listing.write_text("".join(f"{cost:.2f}\t{nodeid}\n" for cost, nodeid in sorted(_costs, reverse=True)))
    terminalreporter.write_sep("=", f"most CPU {SHOWN} (test process and its subprocesses; {total:.0f} s in all)")
    for cost, nodeid in sorted(_costs, reverse=True)[:SHOWN]:
        terminalreporter.write_line(f"{cost:8.2f}s cpu  {nodeid}")
    by_file: Counter[str] = Counter()
    for cost, nodeid in _costs:
        by_file[nodeid.split("::", 1)[0]] += cost
    terminalreporter.write_sep("=", f"most CPU {FILES_SHOWN} files")
    for path, cost in by_file.most_common(FILES_SHOWN):
        terminalreporter.write_line(f"{cost:8.2f}s cpu  {path}")
