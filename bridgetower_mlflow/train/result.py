"""What the phases hand on: Fitted (fit -> measure and close), Measured (measure -> close), and TrainResult, what
`train` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..telemetry.steps.throughput import ThroughputCallback
    from .observe import Sample


@dataclass(frozen=True)
class Fitted:
    """What training left: the trainer, its throughput record, the Trainer's output."""

    trainer: Any  # the recipe's Trainer subclass (trainer.build_trainer_class)
    throughput: ThroughputCallback
    output: Any  # transformers.TrainOutput


@dataclass(frozen=True)
class Measured:
    """Every final figure (the findings' too, on a tracked run), the findings' tags, and where several nodes ran
    the job their data-loader worker series summed by step: close only writes them."""

    metrics: dict[str, Any]
    tags: dict[str, str] = field(default_factory=dict)
    node_series: tuple[Sample, ...] = ()
    logged: tuple[str, ...] = ()  # metrics already logged at the last step (the evaluation training ended with)


@dataclass
class TrainResult:
    """The run, its final metrics, the registered version, records left in a spill file."""

    run_id: str | None
    metrics: dict[str, float] = field(default_factory=dict)
    model_version: str | None = None
    spill_left: int = 0
    spill_file: str | None = None  # where they wait for `upload-spill`
    target: str = ""  # the quality target the run aimed at (its figures are in `metrics`)
