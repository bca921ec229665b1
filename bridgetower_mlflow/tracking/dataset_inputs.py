"""The run's datasets as MLflow inputs (the UI's Dataset column): train and eval, by fingerprint."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def _source(data_source: str, dataset_config: str):
    from mlflow.data.sources import HuggingFaceDatasetSource, LocalArtifactDatasetSource

    kind, _, rest = data_source.partition(":")
    if kind == "hub":
        return HuggingFaceDatasetSource(path=rest.split(":")[0], config_name=dataset_config or None)
    return LocalArtifactDatasetSource(rest)


def log_dataset_inputs(config, data) -> None:
    """Log train/eval as MetaDatasets (no copy of the data; the digest is our fingerprint)."""
    import mlflow
    from mlflow.data.meta_dataset import MetaDataset

    try:
        source = _source(data.source, config.dataset_config)
        name = config.dataset if config.dataset == "sample" else config.dataset.rstrip("/").split("/")[-1]
        mlflow.log_input(MetaDataset(source, name=name, digest=data.fingerprint), context="training")
        mlflow.log_input(MetaDataset(source, name=f"{name}-validation", digest=data.eval_fingerprint), context="eval")
    except Exception as exc:  # noqa: BLE001 - the inputs panel is a convenience, never a reason to fail
        log.warning("could not log dataset inputs: %s", str(exc).splitlines()[0][:200])
