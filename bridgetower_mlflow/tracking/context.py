"""Run-context tags: host facts and software versions.

BridgeTowerContextProvider is the `mlflow.run_context_provider` plugin: MLflow imports it in every
process that imports mlflow (tracking-server workers too), so it stays free of torch and vendor
imports and never raises. MLflow applies it only to runs created by fluent `start_run`, never to
runs `mlflow run` created, so `train` also writes these tags explicitly (see `context_tags`).
"""

from __future__ import annotations

from importlib import metadata

from ..accelerators.base import host_facts

SOFTWARE = {"torch": "torch", "transformers": "transformers", "optimum_habana": "optimum-habana",
            "mlflow": "mlflow", "datasets": "datasets", "bridgetower_mlflow": "bridgetower-mlflow"}


def software_tags() -> dict[str, str]:
    tags = {}
    for tag, dist in SOFTWARE.items():
        try:
            tags[f"software.{tag}"] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return tags


def context_tags(device=None) -> dict[str, str]:
    """All context tags for a training run; `device` is the adapter's DeviceInfo."""
    tags = {**host_facts(), **software_tags()}
    if device is not None:
        tags.update({
            "accelerator": device.kind,
            "accelerator.device_name": device.device_name,
            "accelerator.count": str(device.count),
            "accelerator.memory_gb": "" if device.memory_gb is None else f"{device.memory_gb:g}",
            "accelerator.driver": device.driver or "none",
        })
        tags.update({f"software.{k}": str(v) for k, v in device.software.items()})
        tags.update({k: str(v) for k, v in device.extra_tags.items()})
    return {k: v for k, v in tags.items() if v != ""}


class BridgeTowerContextProvider:
    """Adds host and software tags to runs started with fluent `mlflow.start_run()`.

    Duck-typed RunContextProvider: importing mlflow here would be circular (mlflow imports us).
    """

    def in_context(self) -> bool:
        return True

    def tags(self) -> dict[str, str]:
        try:
            return {**host_facts(), **software_tags()}
        except Exception:  # noqa: BLE001 - a plugin must never break someone's start_run
            return {}
