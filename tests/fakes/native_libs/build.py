"""Compile a stub library with gcc once per source version, into a cache under the system temp folder.

The cache key is the hash of the C sources and the command, so an edited stub is rebuilt and an
unchanged one is reused by every test session (and every xdist worker: the file is moved into place
atomically). The output is named by its soname, so a folder of it can go on LD_LIBRARY_PATH.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path
from shutil import which  # bound now: tests monkeypatch shutil.which to hide hl-smi

import pytest

HERE = Path(__file__).parent
SONAMES = {"nvml": "libnvidia-ml.so.1", "hlml": "libhlml.so"}
FLAGS = ("-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pthread")


def cache_root() -> Path:
    default = Path(tempfile.gettempdir()) / f"bridgetower-stubs-{os.getuid()}"
    return Path(os.environ.get("BRIDGETOWER_STUB_CACHE") or default)


def build(stub: str) -> Path:
    """The compiled stub `stub` ('nvml' or 'hlml'); skips the test where gcc is missing."""
    gcc = which("gcc")
    if gcc is None:
        pytest.skip(f"gcc not found: the stub of {SONAMES[stub]} is compiled at test time")
    source, header = HERE / f"{stub}_stub.c", HERE / "stub_common.h"
    command = [gcc, *FLAGS, f"-Wl,-soname,{SONAMES[stub]}", "-I", str(HERE), str(source)]
    digest = hashlib.sha256("\0".join(command[1:]).encode() + source.read_bytes() + header.read_bytes()).hexdigest()
    target = cache_root() / f"{stub}-{digest[:16]}" / SONAMES[stub]
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    done = subprocess.run([*command, "-o", str(partial)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"gcc could not build {source.name}:\n{done.stderr}")
    os.replace(partial, target)
    return target
