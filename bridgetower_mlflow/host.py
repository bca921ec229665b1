"""Facts about the host, stdlib only: what the run-context plugin tags and the CPU adapter reports."""

from __future__ import annotations

import os
import platform
import socket

from .contract import HOST_CPU_COUNT_TAG, HOST_CPU_MODEL_TAG, HOST_NAME_TAG


def cpu_model_name() -> str:
    """The CPU's marketing name from /proc/cpuinfo (platform's answer elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_facts() -> dict[str, str]:
    """host.cpu_model, host.cpu_count and host.name, without importing anything heavy."""
    return {HOST_CPU_MODEL_TAG: cpu_model_name(), HOST_CPU_COUNT_TAG: str(os.cpu_count() or 0),
            HOST_NAME_TAG: socket.gethostname()}
