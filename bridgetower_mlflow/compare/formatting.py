"""How compare writes a number, a count, a share, a speedup and a price: the report's tables, the charts' labels and
the gate's verdict lines all use these, so a figure reads the same everywhere."""

from __future__ import annotations

Table = tuple[str, list[str], list[list[str]]]  # (caption, headers, rows): every report table
NOISE_MARK = " ~noise"


def format_number(value: float) -> str:
    """One decimal for big numbers, three significant digits for small ones (tiny CPU runs)."""
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def format_speedup(value: float | None, noisy: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" + (NOISE_MARK if noisy else "")


def format_count(value: float) -> str:
    """Samples as a whole number with thousands separators: `12,480`."""
    return f"{value:,.0f}"


def format_share(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f} %"


def format_usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"
