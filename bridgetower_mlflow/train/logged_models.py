"""The run's evaluated checkpoints as LoggedModels, and which of them register_as registers."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import checkpoint_to_register, quality_of
from ..contract import EVAL_CLOCK_METRIC, EVAL_TRAIN_SAMPLES_METRIC
from ..model.checkpoint_models import EvaluatedCheckpoint, log_checkpoint_models
from ..model.publish import BestCheckpoint
from ..redact import first_line
from .checkpoints.wholeness import PREFIX
from .quality import best_evaluated

if TYPE_CHECKING:
    from ..config import TrainConfig
    from ..tracking.session import RunSession

log = logging.getLogger(__name__)


def record_checkpoints(config: TrainConfig, trainer: Any, session: RunSession, uploaded: tuple[str, ...]
                       ) -> BestCheckpoint | None:
    """Log every evaluated checkpoint as a LoggedModel (a warning where the server refuses); returns the best one
    when register_as registers the best, else None (the last model)."""
    quality, run_folder = trainer.quality, Path(trainer.args.output_dir)
    evaluated = [EvaluatedCheckpoint(e.step, run_folder / f"{PREFIX}{e.step}",
                                     (*e.metrics, EVAL_CLOCK_METRIC, EVAL_TRAIN_SAMPLES_METRIC))
                 for e in quality.all() if e.checkpoint]
    try:
        log_checkpoint_models(session.client, session.run_id, evaluated, uploaded)
    except Exception as exc:  # noqa: BLE001 - the run trained and its metrics are logged; the models are an index
        log.warning("the evaluated checkpoints were not logged as models: %s", first_line(exc))
    target = quality_of(config)
    if not config.register_as or target is None or checkpoint_to_register(config) != "best":
        return None
    best = best_evaluated(quality.all(), target, trainer.state.global_step,
                          lambda step: (run_folder / f"{PREFIX}{step}").is_dir())
    if best is None:
        return None
    return BestCheckpoint(best.step, run_folder / f"{PREFIX}{best.step}", dict(best.metrics))
