"""How compare writes a number, a speedup and a cell of repeats (every table and chart label uses these)."""

from __future__ import annotations

from ..contract import DECODE_DEVICE
from .grouping import GroupStats

Table = tuple[str, list[str], list[list[str]]]  # (caption, headers, rows): every report table
NOISE_MARK = " ~noise"
NOISY_MARK = "noisy"
SINGLE_RUN = "single run"
PUBLISHED_PREFIX = "published: "


def format_number(value: float) -> str:
    """One decimal for big numbers, three significant digits for small ones (tiny CPU runs)."""
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def format_speedup(value: float | None, noisy: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" + (NOISE_MARK if noisy else "")


def format_memory(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} GB"


def format_count(value: float) -> str:
    """Samples as a whole number with thousands separators: `12,480`."""
    return f"{value:,.0f}"


def format_share(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f} %"


def repeats_text(group: GroupStats) -> str:
    """`n=5`, or `n=4 of 5, 1 failed: dropped as the slowest` (MLPerf's rule for one failed repeat)."""
    failed = len(group.failures)
    if not failed:
        return f"n={group.n}"
    dropped = ": dropped as the slowest" if failed == 1 else ""
    return f"n={group.n} of {group.n + failed}, {failed} failed{dropped}"


def format_cell(group: GroupStats, loaders: bool = True, memory: bool = True) -> str:
    """`median (n, min-max[, olympic])[ noisy x%][ loader][ peak GB]`; a single run says so."""
    text = f"{format_number(group.median)} ({repeats_text(group)}"
    if group.n == 1:
        text += f", {SINGLE_RUN})" if not group.failures else ")"
    else:
        text += f", {format_number(group.minimum)}-{format_number(group.maximum)}"
        text += f", olympic {format_number(group.olympic)})" if group.olympic is not None else ")"
    if group.noisy:
        text += f" {NOISY_MARK} {(group.spread or 0.0) * 100:.1f}%"
    if loaders and group.setting.decode == DECODE_DEVICE:
        text += " " + "/".join(sorted(group.data_loaders))
    if memory and group.peak_memory_gb is not None:
        text += " " + format_memory(group.peak_memory_gb)
    return text


def format_usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"
