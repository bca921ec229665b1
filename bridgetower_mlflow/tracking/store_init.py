"""A fresh sqlite store gets its schema from one process: others wait instead of racing MLflow's migration."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


def sqlite_file(uri: str) -> Path | None:
    """The database file of a `sqlite:///path` URI (None for any other store, or an in-memory one)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # blocks: a schema takes seconds to create
        yield


def ready_store() -> None:
    """Before the first run of a process: the tracking store exists with its schema (a sqlite file's is created
    under a lock). The first call through MLflow's client makes the store (and a database's schema); MLflow
    keeps that store for the URI, so every later call uses the one made here."""
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = mlflow.get_tracking_uri()
    database = sqlite_file(uri)
    if database is None:
        MlflowClient(uri).search_experiments(max_results=1)
        return
    with _exclusive(database.with_name(database.name + ".init-lock")):
        MlflowClient(uri).search_experiments(max_results=1)
