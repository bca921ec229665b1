"""Comparison -> (caption, headers, rows) tables: the headline, then each section's (throughput, scaling, where the
step goes, data-loading settings, best, quality, efficiency, cost; each only where its figures were measured), and
how a cell of repeats reads in them."""

from __future__ import annotations

from collections.abc import Sequence

from ...contract import ACCELERATOR_TAG, BOTTLENECK_TAG, DECODE_DEVICE, PHASE_FORWARD_BACKWARD, PHASES
from ..analysis.cost import PriceList, usd_per_million_samples
from ..analysis.grouping import STUDY_BASELINE_SETTING, GroupStats
from ..analysis.headline import GAUDI_SIDE, GPU_SIDE, MATCHED_RULE, HeadlinePair
from ..analysis.published_pairs import PublishedPair, setting_text
from ..analysis.runs import PHASE_ORDER
from ..analysis.scaling import scaling_points
from ..analysis.speedups import ConfigSection, SpeedupRow
from ..analysis.stats import within_noise
from ..formatting import Table, format_number, format_share, format_speedup, format_usd
from .quality_tables import every_setting_quality, headline_quality, quality_table

WHY_HEADER = "why: the phase behind most of the gap"
# a phase's column name and chart label where its name is long
SHORT_LABELS = {PHASES[0]: "data wait", PHASES[1]: "to device", PHASE_FORWARD_BACKWARD: "fwd+bwd",
                PHASES[5]: "all-reduce"}
PHASE_SHORT = {phase: SHORT_LABELS.get(phase, phase) for phase in PHASE_ORDER}  # the rest name themselves
NOISY_MARK = "noisy"
SINGLE_RUN = "single run"
PUBLISHED_PREFIX = "published: "
EPOCH_START_COLUMN = "epoch start"  # train_epoch_start_extra_fraction: not a phase, the steps that opened an epoch


def format_memory(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} GB"


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


def short_source(source: str) -> str:
    return source[len(PUBLISHED_PREFIX):] if source.startswith(PUBLISHED_PREFIX) else source


def section_heading(section: ConfigSection, index: int | None = None) -> str:
    number = f"[{index}] " if index else ""
    prefix = f"PUBLISHED, not measured here: {short_source(section.source)} | " if section.published else ""
    return number + prefix + section.title()


def pair_place(pair: HeadlinePair) -> str:
    """`[1] measured`, `[1] measured d2 b8` where the section sweeps axes."""
    kind = "PUBLISHED" if pair.section.published else "measured"
    return " ".join(part for part in (f"[{pair.section_index}] {kind}", pair.point.label) if part)


def headline_table(pairs: Sequence[HeadlinePair], prices: PriceList) -> Table:
    """Gaudi vs GPU per section and axis point: matched setting and best vs best (cost with prices; why with phases)."""
    headers = ["section", "pair", "matched setting", GAUDI_SIDE, GPU_SIDE, "matched", f"{GAUDI_SIDE} best",
               f"{GPU_SIDE} best", "best vs best"]
    quality_headers, quality_rows = headline_quality(pairs)  # to target and quality: only where runs have them
    headers += quality_headers
    if prices:
        headers += [f"{GAUDI_SIDE} best USD/M samples", f"{GPU_SIDE} best USD/M samples",
                    f"{GPU_SIDE}/{GAUDI_SIDE} cost"]
    reasons = [pair.why for pair in pairs]
    if any(reasons):
        headers.append(WHY_HEADER)  # runs without a phase breakdown get no column, never an empty one
    rows = []
    for pair, why, quality in zip(pairs, reasons, quality_rows):
        matched, best = pair.matched, pair.best
        row = [pair_place(pair),
               f"{pair.gaudi} vs {pair.gpu}", matched.setting.label if matched else "none shared",
               format_cell(matched.gaudi, loaders=False, memory=False) if matched else "-",
               format_cell(matched.gpu, loaders=False, memory=False) if matched else "-",
               format_speedup(matched.speedup, matched.within_noise) if matched else format_speedup(None),
               f"{best.gaudi.setting.label}: {format_cell(best.gaudi, loaders=False, memory=False)}",
               f"{best.gpu.setting.label}: {format_cell(best.gpu, loaders=False, memory=False)}",
               format_speedup(best.speedup, best.within_noise), *quality]
        if prices:
            gaudi_cost = usd_per_million_samples(best.gaudi, prices)
            gpu_cost = usd_per_million_samples(best.gpu, prices)
            cheaper = gpu_cost / gaudi_cost if gaudi_cost and gpu_cost else None
            row += [format_usd(gaudi_cost), format_usd(gpu_cost), format_speedup(cheaper)]
        rows.append(row + ([why or "-"] if any(reasons) else []))
    caption = f"Each Gaudi against each GPU in one configuration, samples/s ({MATCHED_RULE})"
    return caption, headers, rows


def _strategies(first: GroupStats, second: GroupStats) -> str:
    names = [g.config.get("distribution_strategy", "") for g in (first, second)]
    return names[0] if names[0] == names[1] else " / ".join(names)


def every_setting_table(pairs: Sequence[HeadlinePair]) -> Table:
    """Each Gaudi column against each GPU column at every setting both ran, whatever the baseline."""
    quality_headers, quality_rows = every_setting_quality(pairs)
    rows = [[f"{pair.gaudi} vs {pair.gpu}", pair_place(pair), shared.setting.label,
             _strategies(shared.gaudi, shared.gpu),
             format_cell(shared.gaudi, loaders=False), format_cell(shared.gpu, loaders=False),
             format_speedup(shared.speedup, shared.within_noise)]
            for pair in pairs for shared in pair.every_setting]
    return ("Each Gaudi against each GPU at every setting both ran, samples/s (median, n repeats, min-max)",
            ["pair", "section", "setting", "strategy", GAUDI_SIDE, GPU_SIDE, f"{GAUDI_SIDE}/{GPU_SIDE}",
             *quality_headers], [row + quality for row, quality in zip(rows, quality_rows)])


def published_pair_table(pair: PublishedPair) -> Table:
    """A published Gaudi-vs-GPU pair across batch sizes, one row per Gaudi setting."""
    rows = [[setting_text(row.cells.gaudi), format_cell(row.cells.gaudi, loaders=False), setting_text(row.cells.gpu),
             format_cell(row.cells.gpu, loaders=False), format_speedup(row.cells.speedup, row.cells.within_noise),
             "matched" if row.matched else f"{pair.gpu}'s fastest ({pair.gpu} did not run this setting)"]
            for row in pair.rows]
    caption = f"{pair.caption} ({short_source(pair.source)}), samples/s"
    return caption, [f"{pair.gaudi} setting", pair.gaudi, f"{pair.gpu} setting", pair.gpu,
                     f"{pair.gaudi}/{pair.gpu}", "compared with"], rows



def scaling_table(section: ConfigSection) -> Table | None:
    """samples/s, per device, scaling efficiency (and the all-reduce share where train measured phases)."""
    points = scaling_points(section)
    if not points:
        return None
    shares = any(p.all_reduce_share is not None for p in points)
    rows = []
    for p in points:
        base = "" if p.base_devices == 1 else f" (vs {p.base_devices}: 1 not measured)"
        efficiency = "-" if p.efficiency is None else f"{p.efficiency * 100:.0f} %{base}"
        row = [" ".join(part for part in (p.line.column, p.line.setting.label, p.line.fixed.label) if part),
               str(p.devices), format_cell(p.cell, loaders=False, memory=False),
               "-" if p.per_device is None else format_number(p.per_device), efficiency]
        rows.append(row + ([format_share(p.all_reduce_share)] if shares else []))
    headers = ["line", "devices", "samples/s", "per device", "scaling efficiency (per device vs 1 device)"]
    caption = "Scaling over devices: per-device samples/s at N over per-device samples/s at 1 (or the fewest measured)"
    return caption, headers + (["all-reduce share of the step"] if shares else []), rows


def measured_cells(section: ConfigSection) -> list[tuple[str, str, GroupStats]]:
    """(row label, column, cell) for every cell whose runs logged a phase breakdown, in table order."""
    return [(row.label, column, row.cells[column]) for row in section.rows for column in section.columns
            if column in row.cells and row.cells[column].phase_fractions]


def section_phases(section: ConfigSection) -> list[str]:
    """The phases any cell of the section measured, in the step's order."""
    seen = {phase for _, _, cell in measured_cells(section) for phase in cell.phase_fractions}
    return [phase for phase in PHASE_ORDER if phase in seen]


def phase_table(section: ConfigSection) -> Table | None:
    """One row per measured cell: samples/s, each phase's median share of the step, what epochs' first steps
    cost beyond the others (where a run logged it), train's verdict tag."""
    cells = measured_cells(section)
    if not cells:
        return None  # runs from before the breakdown: no columns rather than zeros
    phases = section_phases(section)
    epochs = any(cell.epoch_start_share is not None for _, _, cell in cells)
    rows = []
    for label, column, cell in cells:
        shares = cell.phase_shares()  # '-': merged into another phase (Gaudi lazy mode) or not measured
        rows.append([label, column, format_number(cell.median),
                     *(format_share(shares.get(phase)) for phase in phases),
                     *([format_share(cell.epoch_start_share)] if epochs else []),
                     ", ".join(sorted(set(cell.bottlenecks))) or "-"])
    headers = ["setting", ACCELERATOR_TAG, "samples/s", *(PHASE_SHORT[phase] for phase in phases),
               *([EPOCH_START_COLUMN] if epochs else []), BOTTLENECK_TAG]
    caption = "Where the step goes: median share of the measured window per phase"
    if epochs:
        caption += ("; epoch start: what the steps that opened an epoch cost beyond the others' median, a share of "
                    "the same window already inside the phases (the loader's workers start again there)")
    return caption, headers, rows


def _base_cell(section: ConfigSection, row: SpeedupRow, column: str) -> GroupStats | None:
    base = next((r for r in section.rows if r.setting == STUDY_BASELINE_SETTING and r.point == row.point), None)
    return base.cells.get(column) if base else None


def _throughput_table(section: ConfigSection) -> Table:
    base = section.baseline_column
    others = [c for c in section.columns if c != base]
    base_label = base or "baseline (absent here)"
    rows = []
    for row in section.rows:
        cells = [format_cell(row.cells[c]) if c in row.cells else "-" for c in section.columns]
        base_cell = row.cells.get(base) if base else None
        speedups = [format_speedup(row.vs_baseline.get(c), within_noise(row.cells.get(c), base_cell)) for c in others]
        rows.append([row.label, *cells, *speedups])
    headers = ["setting", *section.columns, *(f"{c} vs {base_label}" for c in others)]
    return f"Throughput (samples/s) and speedup over {base_label}", headers, rows


def _setting_table(section: ConfigSection) -> Table:
    rows = []
    for row, setting_row in zip(section.rows, section.setting_rows):
        rows.append([row.label, *(
            format_speedup(setting_row.vs_baseline_setting.get(c),
                           within_noise(row.cells.get(c), _base_cell(section, row, c)))
            for c in section.columns)])
    return ("Data-loading speedup over w0 decode=cpu, within each accelerator",
            ["setting", *section.columns], rows)


def _best_table(section: ConfigSection) -> Table:
    base_label = section.baseline_column or "baseline (absent here)"
    rows = []
    for r in section.best_rows:
        base = section.best_at(r.point).get(section.baseline_column or "")
        noisy = within_noise(r.best, base.best if base else None)
        rows.append([" ".join(part for part in (r.column, r.point.label) if part), r.best.setting.label,
                     format_cell(r.best), format_speedup(r.vs_baseline, noisy)])
    return (f"Best setting per accelerator, head to head with {base_label}'s best",
            [ACCELERATOR_TAG, "best setting", "samples/s", f"vs {base_label} best"], rows)


def efficiency_text(group: GroupStats) -> str:
    """`12.3 TFLOP/s, MFU 41.0%, 2.1 J/sample` from what train measured; '-' where nothing was."""
    tflops, mfu = group.efficiency_median("model_tflops_per_second"), group.efficiency_median("mfu")
    joules = group.efficiency_median("joules_per_sample")
    parts = [f"{format_number(tflops)} TFLOP/s" if tflops is not None else "",
             f"MFU {mfu * 100:.1f}%" if mfu is not None else "",
             f"{joules:.3g} J/sample" if joules is not None else ""]
    return ", ".join(p for p in parts if p) or "-"


def _efficiency_table(section: ConfigSection) -> Table | None:
    if not any(g.efficiency for row in section.rows for g in row.cells.values()):
        return None  # nothing measured: no table rather than a table of dashes
    rows = [[row.label, *(efficiency_text(row.cells[c]) if c in row.cells else "-" for c in section.columns)]
            for row in section.rows]
    return ("Efficiency (medians of what train measured: model TFLOP/s, MFU, energy per sample)",
            ["setting", *section.columns], rows)


def _cost_table(section: ConfigSection, prices: PriceList) -> Table | None:
    costs = {(row.label, c): usd_per_million_samples(g, prices) for row in section.rows for c, g in row.cells.items()}
    if not prices or all(v is None for v in costs.values()):
        return None
    rows = [[row.label, *(format_usd(costs.get((row.label, c))) for c in section.columns)]
            for row in section.rows]
    return ("Cost: USD per million samples, derived from the given prices at the median throughput",
            ["setting", *section.columns], rows)


def section_tables(section: ConfigSection, prices: PriceList | None = None) -> list[Table]:
    """(caption, headers, rows) for each table of one section; scaling, phases, efficiency and cost where known."""
    tables = [_throughput_table(section), scaling_table(section), phase_table(section), _setting_table(section),
              _best_table(section), quality_table(section), _efficiency_table(section),
              _cost_table(section, prices or PriceList())]
    return [table for table in tables if table is not None]
