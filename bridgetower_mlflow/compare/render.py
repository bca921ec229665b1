"""Comparison -> terminal text, markdown, CSV rows and JSON, from one set of table builders."""

from __future__ import annotations

import csv
import io
import json

from .grouping import CONFIG_KEYS, SHORT_KEY_NAMES, GroupStats
from .speedups import Comparison, ConfigSection

METRIC_NOTE = (
    "Throughput = train_samples_per_second (global over all devices, warmup steps excluded); "
    "cells show the median of n repeats [min-max]; speedups are ratios of medians."
)
CSV_FIELDS = (
    "section", "source", "throughput_warmup_steps", *CONFIG_KEYS, "accelerator", "column", "setting",
    "dataloader_num_workers", "decode", "data_loaders", "device_names", "n", "median", "min", "max",
    "baseline_column", "speedup_vs_baseline", "speedup_vs_w0_cpu_decode", "best_for_column",
    "best_vs_baseline_best", "run_ids",
)


def format_speedup(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def format_cell(group: GroupStats) -> str:
    text = f"{group.median:.1f} (n={group.n}"
    text += f", {group.minimum:.1f}-{group.maximum:.1f})" if group.n > 1 else ")"
    if group.setting.decode == "device":
        text += " " + "/".join(sorted(group.data_loaders))
    return text


def section_heading(section: ConfigSection) -> str:
    prefix = f"PUBLISHED, not measured here: {section.source[len('published: '):]} | " if section.published else ""
    return prefix + section.title()


def section_tables(section: ConfigSection) -> list[tuple[str, list[str], list[list[str]]]]:
    """(caption, headers, rows) for the three tables of one section."""
    base = section.baseline_column
    others = [c for c in section.columns if c != base]
    base_label = base or "baseline (absent here)"
    throughput = (
        f"Throughput (samples/s) and speedup over {base_label}",
        ["setting", *section.columns, *(f"{c} vs {base_label}" for c in others)],
        [[row.setting.label, *(format_cell(row.cells[c]) if c in row.cells else "-" for c in section.columns),
          *(format_speedup(row.vs_baseline.get(c)) for c in others)] for row in section.rows],
    )
    settings = (
        "Data-loading speedup over w0 decode=cpu, within each accelerator",
        ["setting", *section.columns],
        [[row.setting.label, *(format_speedup(row.vs_baseline_setting.get(c)) for c in section.columns)]
         for row in section.setting_rows],
    )
    best = (
        f"Best setting per accelerator, head to head with {base_label}'s best",
        ["accelerator", "best setting", "samples/s", f"vs {base_label} best"],
        [[r.column, r.best.setting.label, format_cell(r.best), format_speedup(r.vs_baseline)]
         for r in section.best_rows],
    )
    return [throughput, settings, best]


def _summary_lines(comparison: Comparison) -> list[str]:
    left = ", ".join(f"{n} {status}" for status, n in sorted(comparison.left_out.items())) or "none"
    lines = [
        f"{comparison.run_count} finished train runs from {', '.join(comparison.experiments) or '-'}; "
        f"left out: {left}.",
        METRIC_NOTE,
    ]
    if comparison.allow_diff:
        lines.append("Allowed to differ: " + ", ".join(comparison.allow_diff) + " (differences shown per section).")
    return lines + list(comparison.notes)


def _differences(section: ConfigSection) -> list[str]:
    return [
        f"{SHORT_KEY_NAMES.get(k, k)} differs: " + ", ".join(f"{c}={v}" for c, v in values.items())
        for k, values in section.differences.items()
    ]


def to_markdown(comparison: Comparison, caveats=None) -> str:
    """The report as markdown (also the compare run's description in the MLflow UI)."""
    caveats = caveats or {}
    out = ["# BridgeTower throughput comparison", "", *_summary_lines(comparison), ""]
    for section in comparison.sections:
        out += [f"## {section_heading(section)}", ""]
        out += [f"- {line}" for line in _differences(section)]
        for caption, headers, rows in section_tables(section):
            out += [f"**{caption}**", "", "| " + " | ".join(headers) + " |",
                    "|" + "---|" * len(headers)]
            out += ["| " + " | ".join(row) + " |" for row in rows]
            out.append("")
        if section.published:
            out += [f"- {line}" for line in caveats.get(section.source, ())] + [""]
    return "\n".join(out)


def to_text(comparison: Comparison, caveats=None) -> str:
    """Aligned plain-text tables for the terminal."""
    caveats = caveats or {}
    out = _summary_lines(comparison) + [""]
    for section in comparison.sections:
        out += ["== " + section_heading(section), *_differences(section)]
        for caption, headers, rows in section_tables(section):
            widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
            out += ["", caption, "  ".join(h.ljust(w) for h, w in zip(headers, widths))]
            out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
        if section.published:
            out += [""] + [f"* {line}" for line in caveats.get(section.source, ())]
        out.append("")
    return "\n".join(out)


def csv_rows(comparison: Comparison) -> list[dict]:
    """One row per (section, column, setting) group, numbers unrounded."""
    rows = []
    for index, section in enumerate(comparison.sections, 1):
        best = {r.column: r for r in section.best_rows}
        for row, setting_row in zip(section.rows, section.setting_rows):
            for column, group in row.cells.items():
                rows.append({
                    "section": index, "source": group.source, "throughput_warmup_steps": group.warmup,
                    **group.config, "accelerator": group.accelerator, "column": column,
                    "setting": row.setting.label, "dataloader_num_workers": row.setting.workers,
                    "decode": row.setting.decode, "data_loaders": " ".join(sorted(group.data_loaders)),
                    "device_names": " | ".join(sorted(group.device_names)), "n": group.n,
                    "median": group.median, "min": group.minimum, "max": group.maximum,
                    "baseline_column": section.baseline_column or "",
                    "speedup_vs_baseline": row.vs_baseline.get(column),
                    "speedup_vs_w0_cpu_decode": setting_row.vs_baseline_setting.get(column),
                    "best_for_column": best[column].best is group,
                    "best_vs_baseline_best": best[column].vs_baseline if best[column].best is group else None,
                    "run_ids": " ".join(group.run_ids),
                })
    return rows


def to_csv(comparison: Comparison) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(comparison))
    return buffer.getvalue()


def to_json(comparison: Comparison, caveats=None) -> str:
    """Sections with their config, differences, baseline and per-group rows."""
    rows = csv_rows(comparison)
    sections = [
        {"index": i, "heading": section_heading(s), "source": s.source, "published": s.published,
         "throughput_warmup_steps": s.warmup, "config": s.config, "differences": s.differences,
         "columns": s.columns, "baseline_column": s.baseline_column,
         "groups": [r for r in rows if r["section"] == i]}
        for i, s in enumerate(comparison.sections, 1)
    ]
    document = {
        "metric": "train_samples_per_second", "baseline": comparison.baseline,
        "allow_diff": list(comparison.allow_diff), "run_count": comparison.run_count,
        "left_out": dict(comparison.left_out), "experiments": comparison.experiments,
        "notes": comparison.notes, "sections": sections,
        "published_caveats": {source: list(lines) for source, lines in (caveats or {}).items()},
    }
    return json.dumps(document, indent=2, default=str)
