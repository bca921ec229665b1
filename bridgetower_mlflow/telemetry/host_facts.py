"""Facts about the host a run ran on: CPU model, core count, host name (tags host.*)."""

from __future__ import annotations

import os
import socket

from ..accelerators.cpu import cpu_model_name
from ..contract import HOST_CPU_COUNT_TAG, HOST_CPU_MODEL_TAG, HOST_NAME_TAG


def host_facts() -> dict[str, str]:
    """host.cpu_model, host.cpu_count and host.name, without importing anything heavy."""
    return {HOST_CPU_MODEL_TAG: cpu_model_name(), HOST_CPU_COUNT_TAG: str(os.cpu_count() or 0),
            HOST_NAME_TAG: socket.gethostname()}
