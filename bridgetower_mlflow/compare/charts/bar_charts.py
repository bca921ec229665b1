"""The bar charts (matplotlib, Agg backend): throughput with min-max bars, speedups, efficiency; and write_charts,
which writes every chart of a comparison."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analysis.cost import PriceList, usd_per_million_samples
from ..analysis.grouping import GroupStats
from ..analysis.speedups import ConfigSection
from ..comparison import Comparison
from ..read.eval_series import MAX_CHART_SECTIONS, SeriesSet
from .curve_charts import write_curve_charts
from .phase_chart import write_phase_chart
from .plotting import Axis, Figure, Pyplot, pyplot, section_title, wrapped
from .quality_chart import write_quality_chart

Series = dict[str, list[float | None]]  # bar series name -> a value (or a gap) per label
Errors = dict[str, list[tuple[float, float]]]  # series name -> (below, above) the median per label
PanelValue = Callable[[GroupStats, PriceList], float | None]
MAX_SECTIONS = MAX_CHART_SECTIONS
BAR_AREA = 0.8


def _figure(plt: Pyplot, rows: int, columns: int) -> tuple[Figure, Any]:
    figure, axes = plt.subplots(rows, columns, figsize=(10 * columns, 4.4 * rows), squeeze=False)
    return figure, axes


def _grouped_bars(axis: Axis, labels: list[str], series: Series, errors: Errors | None = None,
                  hatch: str | None = None, annotate: bool = False) -> None:
    """One bar group per label, one bar per series; None values leave a gap."""
    width = min(BAR_AREA / max(len(series), 1), 0.35)
    for index, (name, values) in enumerate(series.items()):
        offset = width * (index - (len(series) - 1) / 2)
        points = [(x + offset, v, i) for i, (x, v) in enumerate(zip(range(len(labels)), values)) if v is not None]
        if not points:
            continue
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        yerr = None
        if errors:
            yerr = [[errors[name][p[2]][0] for p in points], [errors[name][p[2]][1] for p in points]]
        axis.bar(xs, ys, width, yerr=yerr, capsize=3 if yerr else 0, label=name, hatch=hatch)
        if annotate:
            for x, y in zip(xs, ys):
                axis.annotate(f"{y:.2f}x", (x, y), ha="center", va="bottom", fontsize=7)
    axis.set_xticks(range(len(labels)), labels, fontsize=8)
    if any(any(v is not None for v in values) for values in series.values()):
        axis.legend(fontsize=8)


def _draw_throughput(axis: Axis, section: ConfigSection) -> None:
    labels = [row.label for row in section.rows]
    series: Series = {}
    errors: Errors = {}
    for column in section.columns:
        cells = [row.cells.get(column) for row in section.rows]
        series[column] = [g.median if g else None for g in cells]
        errors[column] = [(g.median - g.minimum, g.maximum - g.median) if g else (0, 0) for g in cells]
    _grouped_bars(axis, labels, series, errors, hatch="//" if section.published else None)
    axis.set_ylabel("samples/s (median, min-max)")
    axis.set_title(wrapped(section_title(section)), fontsize=9)


def _draw_accelerator_speedups(axis: Axis, section: ConfigSection) -> None:
    base = section.baseline_column
    others = [c for c in section.columns if c != base]
    labels = [row.label for row in section.rows] + [f"best vs best {p.label}".strip() for p in section.points]
    best = [section.best_at(point) for point in section.points]
    series = {f"{c} vs {base}": [row.vs_baseline.get(c) for row in section.rows]
              + [at[c].vs_baseline if c in at else None for at in best] for c in others}
    _grouped_bars(axis, labels, series, annotate=True)
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_ylabel(f"speedup over {base or 'baseline (absent)'}")
    title = "accelerators: " + section_title(section) if others else "only one accelerator here"
    axis.set_title(wrapped(title, 80), fontsize=9)
    if not others:  # say so inside the panel too: an empty frame reads as a broken chart
        axis.text(0.5, 0.5, f"only {base or 'one accelerator'} measured in this configuration:\n"
                  "no accelerator speedup to draw", ha="center", va="center", fontsize=8, transform=axis.transAxes)


def _draw_setting_speedups(axis: Axis, section: ConfigSection) -> None:
    labels = [row.label for row in section.setting_rows]
    series = {c: [row.vs_baseline_setting.get(c) for row in section.setting_rows] for c in section.columns}
    _grouped_bars(axis, labels, series, annotate=True)
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_ylabel("speedup over w0 decode=cpu")
    axis.set_title("data-loading settings, within each accelerator", fontsize=9)


def _mfu_percent(group: GroupStats, prices: PriceList) -> float | None:
    mfu = group.efficiency_median("mfu")
    return None if mfu is None else mfu * 100


# (y label, value of a cell) for compare's efficiency panels; a panel appears only where a value exists
EFFICIENCY_PANELS = (
    ("MFU, % of dense peak (measured)", _mfu_percent),
    ("energy per sample, J (measured)", lambda group, prices: group.efficiency_median("joules_per_sample")),
    ("USD per million samples (given prices)", usd_per_million_samples),
)


def _panel_series(section: ConfigSection, value: PanelValue, prices: PriceList) -> Series:
    return {c: [value(row.cells[c], prices) if c in row.cells else None for row in section.rows]
            for c in section.columns}


def efficiency_panels(section: ConfigSection, prices: PriceList) -> list[tuple[str, Series]]:
    """(label, series) for each efficiency panel this section has any value for."""
    panels = [(label, _panel_series(section, value, prices)) for label, value in EFFICIENCY_PANELS]
    return [(label, series) for label, series in panels
            if any(v is not None for values in series.values() for v in values)]


def _write_efficiency(plt: Pyplot, comparison: Comparison, sections: list[ConfigSection],
                      output_dir: Path) -> list[Path]:
    shown = [(s, efficiency_panels(s, comparison.prices)) for s in sections]
    shown = [(s, panels) for s, panels in shown if panels]
    if not shown:
        return []  # nothing measured, no prices: no empty chart
    figure, axes = _figure(plt, len(shown), max(len(panels) for _, panels in shown))
    for row, (section, panels) in zip(axes, shown):
        for axis in row[len(panels):]:
            axis.axis("off")
        for axis, (label, series) in zip(row, panels):
            _grouped_bars(axis, [r.label for r in section.rows], series,
                          hatch="//" if section.published else None)
            axis.set_ylabel(label, fontsize=8)
            axis.set_title(wrapped(section_title(section), 60), fontsize=8)
    figure.tight_layout()
    path = Path(output_dir) / "efficiency.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [path]


def write_charts(comparison: Comparison, output_dir: Path, series: SeriesSet | None = None) -> list[Path]:
    """throughput.png, speedups.png; efficiency.png where anything is measured or priced; a curve chart per
    swept axis (scaling.png, batch_size.png, strategy.png); phases.png where train measured phases;
    time_to_quality.png where `series` holds runs' evaluations (read/eval_series.py's fetch_eval_series)."""
    plt = pyplot()
    sections = [s for s in comparison.sections if s.rows][:MAX_SECTIONS]
    if not sections:
        return []
    paths = []
    comparable = [s for s in sections if len(s.columns) > 1 or len(s.setting_rows) > 1]
    panels = {"throughput.png": ((_draw_throughput,), sections),
              "speedups.png": ((_draw_accelerator_speedups, _draw_setting_speedups), comparable)}
    for name, (draws, shown) in panels.items():
        if not shown:
            continue  # a single number has no speedup to draw
        figure, axes = _figure(plt, len(shown), len(draws))
        for row, section in zip(axes, shown):
            for axis, draw in zip(row, draws):
                draw(axis, section)
        if len(comparison.sections) > MAX_SECTIONS:
            figure.suptitle(f"first {MAX_SECTIONS} of {len(comparison.sections)} configurations; "
                            "all are in the CSV/JSON", fontsize=9)
        figure.tight_layout()
        path = Path(output_dir) / name
        figure.savefig(path, dpi=110)
        plt.close(figure)
        paths.append(path)
    return (paths + _write_efficiency(plt, comparison, sections, output_dir)
            + write_curve_charts(plt, sections, Path(output_dir)) + write_phase_chart(plt, sections, Path(output_dir))
            + write_quality_chart(plt, sections, series or SeriesSet({}), Path(output_dir)))
