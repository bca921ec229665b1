"""What every compare chart shares: headless matplotlib, wrapped titles, a section's title, saving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..analysis.speedups import ConfigSection

# matplotlib's objects, typed loosely: compare only draws on them (their stubs move between releases)
Pyplot = Any
Axis = Any
Figure = Any
Color = Any


def pyplot() -> Pyplot:
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on servers or under `mlflow run`
    import matplotlib.pyplot as plt

    return plt


def wrapped(text: str, width: int = 90) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def section_title(section: ConfigSection) -> str:
    prefix = "PUBLISHED: " if section.published else ""
    return prefix + section.title()


def save(plt: Pyplot, figure: Figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
