"""What the user asked compare to do, and its validation (pure but for reading the gate file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .analysis.cost import PriceList, parse_prices
from .analysis.gate import DEFAULT_TOLERANCE, parse_tolerance
from .analysis.quality_gate import DEFAULT_QUALITY_TOLERANCE, parse_quality_tolerance
from .analysis.speedups import parse_allow_diff
from .references.published import REFERENCES
from .report.gate_file import read_gate


@dataclass
class CompareOptions:
    """compare's CLI options as given (validated by parse_options)."""

    experiment_names: tuple[str, ...] = ()
    experiment_ids: tuple[str, ...] = ()
    filter_string: str = ""
    baseline: str | None = None
    allow_diff: str = ""
    reference: str = "none"
    output_dir: str | None = None
    log_to_mlflow: bool = True
    parent_run_id: str = ""
    prices: str = ""
    price_source: str = ""
    gate: str = ""
    write_gate: str = ""
    tolerance: float | str = DEFAULT_TOLERANCE
    quality_tolerance: float | str = DEFAULT_QUALITY_TOLERANCE


@dataclass(frozen=True)
class ParsedOptions:
    """The validated parts build_comparison and the gate use."""

    reference: str
    allow_diff: tuple[str, ...]
    baseline: str | None
    prices: PriceList
    tolerance: float
    quality_tolerance: float
    gate_document: dict[str, Any] | None  # a --write-gate file's JSON


def parse_options(options: CompareOptions) -> ParsedOptions:
    """Validate everything that needs no tracking server; ConfigError on the first bad field."""
    reference = (options.reference or "none").strip().lower()
    if reference not in REFERENCES:
        raise ConfigError("reference", options.reference, "allowed: " + ", ".join(REFERENCES))
    gate = (options.gate or "").strip()
    return ParsedOptions(
        reference=reference,
        allow_diff=parse_allow_diff(options.allow_diff),
        baseline=(options.baseline or "").strip().lower() or None,
        prices=parse_prices(options.prices, options.price_source),
        tolerance=parse_tolerance(options.tolerance),
        quality_tolerance=parse_quality_tolerance(options.quality_tolerance),
        gate_document=read_gate(gate) if gate else None,
    )
