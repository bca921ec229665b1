"""Comparison -> terminal text, markdown, CSV rows and JSON, from one set of table builders."""

from __future__ import annotations

import csv
import io
import json

from ..contract import PEAK_MEMORY_METRIC, THROUGHPUT_METRIC
from .cost import usd_per_million_samples
from .grouping import CONFIG_KEYS, EFFICIENCY_FIELDS, SHORT_KEY_NAMES
from .headline import SettingPair, absent_pair_note
from .published_pairs import PAIR_RULE, PublishedPair, setting_text
from .speedups import Comparison, ConfigSection
from .stats import within_noise
from .tables import (
    every_setting_table,
    headline_table,
    published_pair_table,
    section_heading,
    section_tables,
)

METRIC_NOTE = (
    "Throughput = train_samples_per_second (global over all devices, warmup steps excluded); "
    "cells show the median of n repeats, min-max, and from 5 runs MLPerf's olympic average (best and "
    "worst dropped); speedups are ratios of medians; '~noise': the two cells' min-max ranges overlap; "
    "a single run has no range; 'GB' beside a cell: the highest device_peak_memory_gb of its runs (one device)."
)
CSV_FIELDS = (
    "section", "source", "throughput_warmup_steps", *CONFIG_KEYS, "accelerator", "column", "setting",
    "dataloader_num_workers", "decode", "data_loaders", "device_names", "n", "median", "min", "max",
    "baseline_column", "speedup_vs_baseline", "speedup_vs_w0_cpu_decode", "best_for_column",
    "best_vs_baseline_best", "run_ids", "olympic_mean", "speedup_vs_baseline_within_noise",
    *EFFICIENCY_FIELDS, "usd_per_million_samples", PEAK_MEMORY_METRIC,
)
Table = tuple[str, list[str], list[list[str]]]


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


def _blocks(comparison: Comparison, caveats: dict) -> list[tuple[str, list[str], list[Table], list[str]]]:
    """(heading, lines before, tables, lines after): the headline first, then every section."""
    absent = [] if comparison.headline else [absent_pair_note(comparison.sections)]
    blocks = [("Headline: Gaudi vs GPU", absent, headline_tables(comparison), [])]
    if comparison.published_pairs:
        sources = sorted({pair.source for pair in comparison.published_pairs})
        blocks.append(("Published pairs across batch sizes",
                       [PAIR_RULE], [published_pair_table(pair) for pair in comparison.published_pairs],
                       [line for source in sources for line in caveats.get(source, ())]))
    for index, section in enumerate(comparison.sections, 1):
        after = list(caveats.get(section.source, ())) if section.published else []
        blocks.append((section_heading(section, index), _differences(section),
                       section_tables(section, comparison.prices), after))
    return blocks


def to_markdown(comparison: Comparison, caveats=None) -> str:
    """The report as markdown (also the compare run's description in the MLflow UI)."""
    out = ["# BridgeTower throughput comparison", "", *_summary_lines(comparison), ""]
    for heading, before, tables, after in _blocks(comparison, caveats or {}):
        out += [f"## {heading}", ""] + [f"- {line}" for line in before] + ([""] if before else [])
        for caption, headers, rows in tables:
            out += [f"**{caption}**", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            out += ["| " + " | ".join(row) + " |" for row in rows] + [""]
        out += [f"- {line}" for line in after] + ([""] if after else [])
    return "\n".join(out)


def to_text(comparison: Comparison, caveats=None) -> str:
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


def _group_row(comparison: Comparison, index: int, section: ConfigSection, row, setting_row, column) -> dict:
    group, best = row.cells[column], {r.column: r for r in section.best_rows}[column]
    base = row.cells.get(section.baseline_column)
    return {
        "section": index, "source": group.source, "throughput_warmup_steps": group.warmup,
        **group.config, "accelerator": group.accelerator, "column": column,
        "setting": row.setting.label, "dataloader_num_workers": row.setting.workers,
        "decode": row.setting.decode, "data_loaders": " ".join(sorted(group.data_loaders)),
        "device_names": " | ".join(sorted(group.device_names)), "n": group.n,
        "median": group.median, "min": group.minimum, "max": group.maximum,
        "baseline_column": section.baseline_column or "",
        "speedup_vs_baseline": row.vs_baseline.get(column),
        "speedup_vs_w0_cpu_decode": setting_row.vs_baseline_setting.get(column),
        "best_for_column": best.best is group,
        "best_vs_baseline_best": best.vs_baseline if best.best is group else None,
        "run_ids": " ".join(group.run_ids), "olympic_mean": group.olympic,
        "speedup_vs_baseline_within_noise": within_noise(group, base) if column != section.baseline_column else None,
        **{name: group.efficiency_median(name) for name in EFFICIENCY_FIELDS},
        "usd_per_million_samples": usd_per_million_samples(group, comparison.prices),
        PEAK_MEMORY_METRIC: group.peak_memory_gb,
    }


def csv_rows(comparison: Comparison) -> list[dict]:
    """One row per (section, column, setting) group, numbers unrounded."""
    return [_group_row(comparison, index, section, row, setting_row, column)
            for index, section in enumerate(comparison.sections, 1)
            for row, setting_row in zip(section.rows, section.setting_rows)
            for column in row.cells]


def to_csv(comparison: Comparison) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(comparison))
    return buffer.getvalue()


def _cell_record(group) -> dict:
    return {"median": group.median, "n": group.n, "min": group.minimum, "max": group.maximum,
            PEAK_MEMORY_METRIC: group.peak_memory_gb, "run_ids": list(group.run_ids)}


def _setting_record(shared: SettingPair) -> dict:
    return {"setting": shared.setting.label, "gaudi": _cell_record(shared.gaudi), "gpu": _cell_record(shared.gpu),
            "speedup": shared.speedup, "within_noise": shared.within_noise}


def published_pair_records(pairs: list[PublishedPair]) -> list[dict]:
    """The published pairs across batch sizes as plain numbers (JSON)."""
    return [{
        "source": pair.source, "caption": pair.caption, "gaudi": pair.gaudi, "gpu": pair.gpu,
        "gaudi_batch": pair.gaudi_batch, "gpu_batch": pair.gpu_batch, "rule": PAIR_RULE,
        "rows": [{"gaudi_setting": setting_text(row.gaudi), "gpu_setting": setting_text(row.gpu),
                  "matched": row.matched, "speedup": row.speedup, "within_noise": row.within_noise,
                  "gaudi": _cell_record(row.gaudi), "gpu": _cell_record(row.gpu)} for row in pair.rows],
    } for pair in pairs]


def headline_records(comparison: Comparison) -> list[dict]:
    """The headline pairs as plain numbers (JSON)."""
    return [{
        "section": pair.section_index, "source": pair.section.source, "gaudi": pair.gaudi, "gpu": pair.gpu,
        "matched_setting": pair.matched_setting.label if pair.matched_setting else None,
        "matched_speedup": pair.matched_speedup, "matched_within_noise": pair.matched_within_noise,
        "gaudi_best_setting": pair.best_gaudi.setting.label, "gpu_best_setting": pair.best_gpu.setting.label,
        "best_vs_best": pair.best_speedup, "best_within_noise": pair.best_within_noise,
        "gaudi_best_usd_per_million_samples": usd_per_million_samples(pair.best_gaudi, comparison.prices),
        "gpu_best_usd_per_million_samples": usd_per_million_samples(pair.best_gpu, comparison.prices),
        "every_setting": [_setting_record(shared) for shared in pair.every_setting],
    } for pair in comparison.headline]


def to_json(comparison: Comparison, caveats=None) -> str:
    """Headline, sections with their config, differences, baseline and per-group rows."""
    rows = csv_rows(comparison)
    sections = [
        {"index": i, "heading": section_heading(s), "source": s.source, "published": s.published,
         "throughput_warmup_steps": s.warmup, "config": s.config, "differences": s.differences,
         "columns": s.columns, "baseline_column": s.baseline_column,
         "groups": [r for r in rows if r["section"] == i]}
        for i, s in enumerate(comparison.sections, 1)
    ]
    document = {
        "metric": THROUGHPUT_METRIC, "baseline": comparison.baseline,
        "allow_diff": list(comparison.allow_diff), "run_count": comparison.run_count,
        "left_out": dict(comparison.left_out), "experiments": comparison.experiments,
        "notes": comparison.notes, "headline": headline_records(comparison),
        "published_pairs": published_pair_records(comparison.published_pairs),
        "prices": {"usd_per_device_hour": comparison.prices.usd_per_device_hour,
                   "source": comparison.prices.source},
        "sections": sections,
        "published_caveats": {source: list(lines) for source, lines in (caveats or {}).items()},
    }
    return json.dumps(document, indent=2, default=str)
