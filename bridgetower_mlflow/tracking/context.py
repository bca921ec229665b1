"""Run-context tags: host facts and software versions.

BridgeTowerContextProvider is the `mlflow.run_context_provider` plugin: MLflow imports it in every
process that imports mlflow (tracking-server workers too), so it stays free of torch and vendor
imports and never raises. MLflow applies it only to runs created by fluent `start_run`, never to
runs `mlflow run` created, so `train` also writes these tags explicitly (`context_tags`).
"""

from __future__ import annotations

from importlib import metadata

from ..contract import SOFTWARE_TAG_PREFIX
from ..host import host_facts

SOFTWARE = {"torch": "torch", "transformers": "transformers", "optimum_habana": "optimum-habana",
            "mlflow": "mlflow", "datasets": "datasets", "bridgetower_mlflow": "bridgetower-mlflow"}


def software_tags() -> dict[str, str]:
    tags = {}
    for tag, dist in SOFTWARE.items():
        try:
            tags[SOFTWARE_TAG_PREFIX + tag] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return tags


def context_tags() -> dict[str, str]:
    """Host facts and software versions: the tags every run of this project carries."""
    return {k: v for k, v in {**host_facts(), **software_tags()}.items() if v != ""}


class BridgeTowerContextProvider:
    """Adds host and software tags to runs started with fluent `mlflow.start_run()`.

    Duck-typed RunContextProvider: importing mlflow here would be circular (mlflow imports us).
    """

    def in_context(self) -> bool:
        return True

    def tags(self) -> dict[str, str]:
        try:
            return context_tags()
        except Exception:  # noqa: BLE001 - a plugin must never break someone's start_run
            return {}
