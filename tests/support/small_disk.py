"""Real small filesystems for disk-full tests: a tmpfs of a few MB (mounting needs root; elsewhere the test is
skipped with the reason, and the injected-ENOSPC tests in test_disk_space.py cover the same writes)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disks(root: Path) -> Iterator:
    """`make(size_mb, name)` mounts a tmpfs of that size at root/name; every one is unmounted at the end."""
    mounted: list[Path] = []

    def make(size_mb: float, name: str = "disk") -> Path:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={int(size_mb * 1024)}k", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a {size_mb} MB tmpfs here ({done.stderr.strip() or done.returncode}); "
                        "test_disk_space.py injects ENOSPC for these writes instead")
        mounted.append(folder)
        return folder

    try:
        yield make
    finally:
        for folder in reversed(mounted):
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def grow(folder: Path, size_mb: float) -> None:
    """Room made: the tmpfs at `folder` now holds `size_mb` MB (its files stay)."""
    subprocess.run(["mount", "-o", f"remount,size={int(size_mb * 1024)}k", str(folder)], check=True)


def fill(folder: Path) -> None:
    """Write into `folder` until the disk refuses: nothing is left free."""
    with open(folder / "filler.bin", "wb", buffering=0) as handle:
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 65536)
    with open(folder / "filler-tail.bin", "wb", buffering=0) as handle:
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0")
