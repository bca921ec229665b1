"""What a sweep passes every cell of time to quality (target, eval_steps, stop_at_target), and each repeat's seed."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config import parse_bool, parse_int
from ..target import quality_target
from .grid import SweepCell


@dataclass(frozen=True)
class QualitySettings:
    """The cells' time-to-quality options as given (None or "": train's default) and the first repeat's seed."""

    target: str = ""  # canonical spelling
    eval_steps: int | None = None
    stop_at_target: bool | None = None
    seed: int | None = None

    def train_args(self) -> list[str]:
        """The options every cell's train gets (the seed is each cell's own: SweepCell.seed)."""
        args = ["--target", self.target] if self.target else []
        if self.eval_steps is not None:
            args += ["--eval-steps", str(self.eval_steps)]
        if self.stop_at_target is not None:
            args += ["--stop-at-target", "true" if self.stop_at_target else "false"]
        return args

    def seed_of(self, repeat: int) -> int | None:
        """Repeat r's seed. With a target, seed + r - 1: MLPerf requires a new seed per run, since convergence
        varies with it and one seed would measure one draw r times. Without one, the same seed (None: train's
        default) every repeat: throughput repeats measure the same work again, and a seed only adds noise there."""
        if not self.target:
            return self.seed
        return (self.seed if self.seed is not None else default_seed()) + repeat - 1

    def tags(self) -> dict[str, str]:
        """What the sweep's parent run records of them."""
        return {"sweep.target": self.target or "none",
                "sweep.eval_steps": "default" if self.eval_steps is None else str(self.eval_steps),
                "sweep.seed": "default" if self.seed is None else str(self.seed)}


def default_seed() -> int:
    from ..config import TrainConfig

    return int(next(f.default for f in dataclasses.fields(TrainConfig)
                    if f.name == "seed" and f.default is not dataclasses.MISSING))


def _given(value: object) -> bool:
    return value is not None and str(value).strip() != ""


def parse_quality_settings(target: object = "", eval_steps: object = "", stop_at_target: object = "",
                           seed: object = "") -> QualitySettings:
    """Validated settings; ConfigError naming the field (before any run starts)."""
    return QualitySettings(
        target=quality_target("target", target) if _given(target) else "",
        eval_steps=parse_int("eval_steps", eval_steps, 0) if _given(eval_steps) else None,
        stop_at_target=parse_bool("stop_at_target", stop_at_target) if _given(stop_at_target) else None,
        seed=parse_int("seed", seed, 0) if _given(seed) else None,
    )


def with_seeds(cells: list[SweepCell], settings: QualitySettings) -> list[SweepCell]:
    """The cells, each with its repeat's seed."""
    return [dataclasses.replace(cell, seed=settings.seed_of(cell.repeat)) for cell in cells]
