"""Comparison -> terminal text and markdown, from one set of table builders (CSV and JSON: export.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..analysis.axes import axes_text, point_of
from ..analysis.grouping import SHORT_KEY_NAMES
from ..analysis.headline import absent_pair_note
from ..analysis.published_pairs import PAIR_RULE
from ..analysis.scaling import cpu_devices_note
from ..analysis.speedups import ConfigSection
from ..analysis.stats import INVALID_FROM, NOISY_SPREAD
from ..comparison import Comparison
from ..formatting import Table
from .quality_tables import QUALITY_NOTE, TARGET_NOTE, headline_sentences, placed_quality
from .tables import (
    NOISY_MARK,
    every_setting_table,
    headline_table,
    pair_place,
    published_pair_table,
    section_heading,
    section_tables,
)

Block = tuple[str, list[str], list[Table], list[str]]  # heading, lines before, tables, lines after
Caveats = Mapping[str, Sequence[str]]  # published source -> its caveat lines
METRIC_NOTE = (
    "Throughput = train_samples_per_second (global over all devices, warmup steps excluded); "
    "cells show the median of n repeats, min-max, and from 5 runs MLPerf's olympic average (best and "
    "worst dropped); speedups are ratios of medians; '~noise': the two cells' min-max ranges overlap; "
    "a single run has no range; 'GB' beside a cell: the highest device_peak_memory_gb of its runs (one device); "
    f"'{NOISY_MARK}': its repeats spread more than {NOISY_SPREAD:.0%} of the median "
    "((max - min) / median); a sweep's failed repeat stays in the record: one is dropped as the slowest "
    f"(MLPerf's olympic rule), {INVALID_FROM} or more make the cell invalid (left out, with the reason)."
)


def headline_tables(comparison: Comparison) -> list[Table]:
    """The headline table and every shared setting below it, or none (the summary then says why)."""
    if not comparison.headline:
        return []
    return [headline_table(comparison.headline, comparison.prices), every_setting_table(comparison.headline)]


def _summary_lines(comparison: Comparison) -> list[str]:
    left = ", ".join(f"{n} {status}" for status, n in sorted(comparison.left_out.items())) or "none"
    lines = [
        f"{comparison.run_count} finished train runs from {', '.join(comparison.experiments) or '-'}; "
        f"left out: {left}.",
        METRIC_NOTE,
    ]
    placed = [stats for section in comparison.sections for *_, stats in placed_quality(section)]
    lines += ([QUALITY_NOTE] if placed else []) + ([TARGET_NOTE] if any(s.key.target for s in placed) else [])
    if comparison.allow_diff:
        lines.append("Allowed to differ: " + ", ".join(comparison.allow_diff) + " (differences shown per section).")
    if comparison.prices:
        lines.append("Prices as given, not built in: " + comparison.prices.describe()
                     + "; USD per million samples = price x devices / samples per hour x 1e6 (derived).")
    return lines + list(comparison.notes)


def _differences(section: ConfigSection) -> list[str]:
    return [
        f"{SHORT_KEY_NAMES.get(k, k)} differs: " + ", ".join(f"{c}={v}" for c, v in values.items())
        for k, values in section.differences.items()
    ]


def _before(section: ConfigSection) -> list[str]:
    """What the section's tables need said first: its curves, allowed differences, invalid cells."""
    lines = [axes_text(section.points, section.axes).capitalize() + " (one section; rows show where each cell "
             "sits; the charts draw the curves)."] if section.axes else []
    note = cpu_devices_note(section)
    lines += _differences(section) + ([note] if note else [])
    return lines + [f"INVALID, left out of every comparison: {g.accelerator} {g.setting.label}"
                    f"{' ' + point_of(g.config, section.axes).label if section.axes else ''}: {g.invalid}"
                    for g in section.invalid]


def _blocks(comparison: Comparison, caveats: Caveats) -> list[Block]:
    """(heading, lines before, tables, lines after): the headline first, then every section."""
    absent = [] if comparison.headline else [absent_pair_note(comparison.sections)]
    sentences = headline_sentences(comparison.headline, [pair_place(pair) for pair in comparison.headline])
    blocks: list[Block] = [("Headline: Gaudi vs GPU", absent, headline_tables(comparison), sentences)]
    if comparison.published_pairs:
        sources = sorted({pair.source for pair in comparison.published_pairs})
        blocks.append(("Published pairs across batch sizes",
                       [PAIR_RULE], [published_pair_table(pair) for pair in comparison.published_pairs],
                       [line for source in sources for line in caveats.get(source, ())]))
    for index, section in enumerate(comparison.sections, 1):
        after = list(caveats.get(section.source, ())) if section.published else []
        blocks.append((section_heading(section, index), _before(section),
                       section_tables(section, comparison.prices), after))
    return blocks


def to_markdown(comparison: Comparison, caveats: Caveats | None = None) -> str:
    """The report as markdown (also the compare run's description in the MLflow UI)."""
    out = ["# BridgeTower throughput comparison", "", *_summary_lines(comparison), ""]
    for heading, before, tables, after in _blocks(comparison, caveats or {}):
        out += [f"## {heading}", ""] + [f"- {line}" for line in before] + ([""] if before else [])
        for caption, headers, rows in tables:
            out += [f"**{caption}**", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            out += ["| " + " | ".join(row) + " |" for row in rows] + [""]
        out += [f"- {line}" for line in after] + ([""] if after else [])
    return "\n".join(out)


def to_text(comparison: Comparison, caveats: Caveats | None = None) -> str:
    """Aligned plain-text tables for the terminal."""
    out = _summary_lines(comparison) + [""]
    for heading, before, tables, after in _blocks(comparison, caveats or {}):
        out += ["== " + heading, *before]
        for caption, headers, rows in tables:
            widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
            out += ["", caption, "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
            out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
        out += ([""] + [f"* {line}" for line in after] if after else []) + [""]
    return "\n".join(out)
