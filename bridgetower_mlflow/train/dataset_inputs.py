"""The run's datasets as MLflow inputs (the UI's Dataset column): train and eval, by fingerprint."""

from __future__ import annotations

import logging
from typing import Any

from ..redact import first_line

log = logging.getLogger(__name__)


def _source(data_source: str, dataset_config: str) -> Any:
    # mlflow re-exports these lazily (mlflow.data.sources.__getattr__): invisible to a type checker
    from mlflow.data.sources import HuggingFaceDatasetSource, LocalArtifactDatasetSource  # type: ignore[attr-defined]

    kind, _, rest = data_source.partition(":")
    if kind == "hub":
        return HuggingFaceDatasetSource(path=rest.split(":")[0], config_name=dataset_config or None)
    return LocalArtifactDatasetSource(rest)


def log_dataset_inputs(config: Any, data: Any) -> None:
    """Log train/eval as MetaDatasets (no copy of the data; the digest is our fingerprint)."""
    import mlflow
    from mlflow.data.meta_dataset import MetaDataset

    try:
        source = _source(data.source, config.dataset_config)
        name = config.dataset if config.dataset == "sample" else config.dataset.rstrip("/").split("/")[-1]
        # MetaDataset implements `profile` as a property mlflow's annotations still call abstract
        train = MetaDataset(source, name=name, digest=data.fingerprint)  # type: ignore[abstract]
        evaluation = MetaDataset(source, name=f"{name}-validation", digest=data.eval_fingerprint)  # type: ignore[abstract]
        mlflow.log_input(train, context="training")
        mlflow.log_input(evaluation, context="eval")
    except Exception as exc:  # noqa: BLE001 - the inputs panel is a convenience, never a reason to fail
        log.warning("could not log dataset inputs: %s", first_line(exc))
