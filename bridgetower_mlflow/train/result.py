"""What `train` returns: the run, its final metrics, the registered version, records left in a spill file."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TrainResult:
    run_id: str | None
    metrics: dict[str, float] = field(default_factory=dict)
    model_version: str | None = None
    spill_left: int = 0
    spill_file: str | None = None  # where they wait for `upload-spill`
