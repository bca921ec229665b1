"""Each evaluated checkpoint as an MLflow LoggedModel of its run at its step, carrying that evaluation's metrics, so
the run's logged models and `mlflow.search_logged_models(order_by=...)` rank the checkpoints by quality.

A checkpoint is never copied for it: the model points where the checkpoint lies (under the run's checkpoints/
artifacts where checkpoint_upload put it, else the run folder) and says whether it is still kept there (Trainer's
rotation keeps the best and the latest).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contract import CHECKPOINT_STEP_TAG, CHECKPOINT_URI_TAG

log = logging.getLogger(__name__)
CHECKPOINT_KEPT_TAG = "checkpoint.kept"  # true while the folder (or its upload) is still there
MODEL_TYPE = "checkpoint"


@dataclass(frozen=True)
class EvaluatedCheckpoint:
    """A checkpoint saved at the step of an evaluation: where it was written, and the metrics that evaluation logged."""

    step: int
    folder: Path
    metric_keys: tuple[str, ...]


def log_checkpoint_models(client: Any, run_id: str, checkpoints: Sequence[EvaluatedCheckpoint],
                          uploaded: Iterable[str] = ()) -> dict[int, str]:
    """One external LoggedModel per checkpoint (a run output at its step, its evaluation's metrics linked by
    model id, read back from the run as they were logged); returns {step: model id}."""
    import mlflow
    from mlflow.entities import LoggedModelOutput, Metric

    if not checkpoints:
        return {}
    experiment_id = client.get_run(run_id).info.experiment_id
    remote = {Path(path).name: path for path in uploaded}
    keys = sorted({key for checkpoint in checkpoints for key in checkpoint.metric_keys})
    history = [m for key in keys for m in client.get_metric_history(run_id, key)]
    models = {}
    for checkpoint in checkpoints:
        name = checkpoint.folder.name
        uri = f"runs:/{run_id}/{remote[name]}" if name in remote else checkpoint.folder.resolve().as_uri()
        kept = name in remote or checkpoint.folder.is_dir()
        model = mlflow.create_external_model(
            name=name, source_run_id=run_id, experiment_id=experiment_id, model_type=MODEL_TYPE,
            tags={CHECKPOINT_STEP_TAG: str(checkpoint.step), CHECKPOINT_URI_TAG: uri,
                  CHECKPOINT_KEPT_TAG: str(kept).lower()})
        client.log_outputs(run_id, [LoggedModelOutput(model.model_id, checkpoint.step)])
        linked = [Metric(m.key, m.value, m.timestamp, m.step, model_id=model.model_id, run_id=run_id)
                  for m in history if m.step == checkpoint.step and m.key in checkpoint.metric_keys]
        if linked:
            client.log_batch(run_id, metrics=linked)
        models[checkpoint.step] = model.model_id
    return models
