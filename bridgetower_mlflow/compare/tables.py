"""Comparison -> (caption, headers, rows) tables: the headline, then each section's tables."""

from __future__ import annotations

from .cost import PriceList, usd_per_million_samples
from .grouping import GroupStats, Setting
from .headline import MATCHED_RULE, HeadlinePair
from .published_pairs import PublishedPair, setting_text
from .speedups import ConfigSection
from .stats import within_noise

NOISE_MARK = " ~noise"
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


def format_cell(group: GroupStats, loaders: bool = True, memory: bool = True) -> str:
    """`median (n, min-max[, olympic])[ loader][ peak GB]`; a single run says so."""
    if group.n == 1:
        text = f"{format_number(group.median)} (n=1, {SINGLE_RUN})"
    else:
        text = f"{format_number(group.median)} (n={group.n}, "
        text += f"{format_number(group.minimum)}-{format_number(group.maximum)}"
        text += f", olympic {format_number(group.olympic)})" if group.olympic is not None else ")"
    if loaders and group.setting.decode == "device":
        text += " " + "/".join(sorted(group.data_loaders))
    if memory and group.peak_memory_gb is not None:
        text += " " + format_memory(group.peak_memory_gb)
    return text


def format_usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def short_source(source: str) -> str:
    return source[len(PUBLISHED_PREFIX):] if source.startswith(PUBLISHED_PREFIX) else source


def section_heading(section: ConfigSection, index: int | None = None) -> str:
    number = f"[{index}] " if index else ""
    prefix = f"PUBLISHED, not measured here: {short_source(section.source)} | " if section.published else ""
    return number + prefix + section.title()


def headline_table(pairs: list[HeadlinePair], prices: PriceList) -> tuple[str, list[str], list[list[str]]]:
    """Gaudi vs GPU per section: matched setting and best vs best (and cost, with prices)."""
    headers = ["section", "pair", "matched setting", "gaudi", "gpu", "matched", "gaudi best", "gpu best",
               "best vs best"]
    if prices:
        headers += ["gaudi best USD/M samples", "gpu best USD/M samples", "gpu/gaudi cost"]
    rows = []
    for pair in pairs:
        row = [f"[{pair.section_index}] " + ("PUBLISHED" if pair.section.published else "measured"),
               f"{pair.gaudi} vs {pair.gpu}", pair.matched_setting.label if pair.matched_setting else "none shared",
               format_cell(pair.matched_gaudi, loaders=False, memory=False) if pair.matched_gaudi else "-",
               format_cell(pair.matched_gpu, loaders=False, memory=False) if pair.matched_gpu else "-",
               format_speedup(pair.matched_speedup, pair.matched_within_noise),
               f"{pair.best_gaudi.setting.label}: {format_cell(pair.best_gaudi, loaders=False, memory=False)}",
               f"{pair.best_gpu.setting.label}: {format_cell(pair.best_gpu, loaders=False, memory=False)}",
               format_speedup(pair.best_speedup, pair.best_within_noise)]
        if prices:
            gaudi_cost = usd_per_million_samples(pair.best_gaudi, prices)
            gpu_cost = usd_per_million_samples(pair.best_gpu, prices)
            cheaper = gpu_cost / gaudi_cost if gaudi_cost and gpu_cost else None
            row += [format_usd(gaudi_cost), format_usd(gpu_cost), format_speedup(cheaper)]
        rows.append(row)
    caption = f"Each Gaudi against each GPU in one configuration, samples/s ({MATCHED_RULE})"
    return caption, headers, rows


def _strategies(first: GroupStats, second: GroupStats) -> str:
    names = [g.config.get("distribution_strategy", "") for g in (first, second)]
    return names[0] if names[0] == names[1] else " / ".join(names)


def every_setting_table(pairs: list[HeadlinePair]) -> tuple[str, list[str], list[list[str]]]:
    """Each Gaudi column against each GPU column at every setting both ran, whatever the baseline."""
    rows = [[f"{pair.gaudi} vs {pair.gpu}",
             f"[{pair.section_index}] " + ("PUBLISHED" if pair.section.published else "measured"),
             shared.setting.label, _strategies(shared.gaudi, shared.gpu),
             format_cell(shared.gaudi, loaders=False), format_cell(shared.gpu, loaders=False),
             format_speedup(shared.speedup, shared.within_noise)]
            for pair in pairs for shared in pair.every_setting]
    return ("Each Gaudi against each GPU at every setting both ran, samples/s (median, n repeats, min-max)",
            ["pair", "section", "setting", "strategy", "gaudi", "gpu", "gaudi/gpu"], rows)


def published_pair_table(pair: PublishedPair) -> tuple[str, list[str], list[list[str]]]:
    """A published Gaudi-vs-GPU pair across batch sizes, one row per Gaudi setting."""
    rows = [[setting_text(row.gaudi), format_cell(row.gaudi, loaders=False), setting_text(row.gpu),
             format_cell(row.gpu, loaders=False), format_speedup(row.speedup, row.within_noise),
             "matched" if row.matched else f"{pair.gpu}'s fastest ({pair.gpu} did not run this setting)"]
            for row in pair.rows]
    caption = f"{pair.caption} ({short_source(pair.source)}), samples/s"
    return caption, [f"{pair.gaudi} setting", pair.gaudi, f"{pair.gpu} setting", pair.gpu,
                     f"{pair.gaudi}/{pair.gpu}", "compared with"], rows


def _base_cell(section: ConfigSection, column: str) -> GroupStats | None:
    row = next((r for r in section.rows if r.setting == Setting(0, "cpu")), None)
    return row.cells.get(column) if row else None


def _throughput_table(section: ConfigSection):
    base = section.baseline_column
    others = [c for c in section.columns if c != base]
    base_label = base or "baseline (absent here)"
    rows = []
    for row in section.rows:
        cells = [format_cell(row.cells[c]) if c in row.cells else "-" for c in section.columns]
        speedups = [format_speedup(row.vs_baseline.get(c), within_noise(row.cells.get(c), row.cells.get(base)))
                    for c in others]
        rows.append([row.setting.label, *cells, *speedups])
    headers = ["setting", *section.columns, *(f"{c} vs {base_label}" for c in others)]
    return f"Throughput (samples/s) and speedup over {base_label}", headers, rows


def _setting_table(section: ConfigSection):
    rows = []
    for row, setting_row in zip(section.rows, section.setting_rows):
        rows.append([row.setting.label, *(
            format_speedup(setting_row.vs_baseline_setting.get(c),
                           within_noise(row.cells.get(c), _base_cell(section, c)))
            for c in section.columns)])
    return ("Data-loading speedup over w0 decode=cpu, within each accelerator",
            ["setting", *section.columns], rows)


def _best_table(section: ConfigSection):
    base_label = section.baseline_column or "baseline (absent here)"
    best = {r.column: r.best for r in section.best_rows}
    rows = [[r.column, r.best.setting.label, format_cell(r.best),
             format_speedup(r.vs_baseline, within_noise(r.best, best.get(section.baseline_column)))]
            for r in section.best_rows]
    return (f"Best setting per accelerator, head to head with {base_label}'s best",
            ["accelerator", "best setting", "samples/s", f"vs {base_label} best"], rows)


def efficiency_text(group: GroupStats) -> str:
    """`12.3 TFLOP/s, MFU 41.0%, 2.1 J/sample` from what train measured; '-' where nothing was."""
    tflops, mfu = group.efficiency_median("model_tflops_per_second"), group.efficiency_median("mfu")
    joules = group.efficiency_median("joules_per_sample")
    parts = [f"{format_number(tflops)} TFLOP/s" if tflops is not None else "",
             f"MFU {mfu * 100:.1f}%" if mfu is not None else "",
             f"{joules:.3g} J/sample" if joules is not None else ""]
    return ", ".join(p for p in parts if p) or "-"


def _efficiency_table(section: ConfigSection):
    if not any(g.efficiency for row in section.rows for g in row.cells.values()):
        return None  # nothing measured: no table rather than a table of dashes
    rows = [[row.setting.label, *(efficiency_text(row.cells[c]) if c in row.cells else "-" for c in section.columns)]
            for row in section.rows]
    return ("Efficiency (medians of what train measured: model TFLOP/s, MFU, energy per sample)",
            ["setting", *section.columns], rows)


def _cost_table(section: ConfigSection, prices: PriceList):
    costs = {(row.setting, c): usd_per_million_samples(g, prices) for row in section.rows for c, g in row.cells.items()}
    if not prices or all(v is None for v in costs.values()):
        return None
    rows = [[row.setting.label, *(format_usd(costs.get((row.setting, c))) for c in section.columns)]
            for row in section.rows]
    return ("Cost: USD per million samples, derived from the given prices at the median throughput",
            ["setting", *section.columns], rows)


def section_tables(section: ConfigSection, prices: PriceList | None = None) -> list[tuple]:
    """(caption, headers, rows) for each table of one section; efficiency and cost only where known."""
    tables = [_throughput_table(section), _setting_table(section), _best_table(section),
              _efficiency_table(section), _cost_table(section, prices or PriceList())]
    return [table for table in tables if table is not None]
