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
    """Before the first run of a process: the tracking store exists with its schema (created under a lock)."""
    import mlflow
    from mlflow.tracking._tracking_service.utils import _get_store

    database = sqlite_file(mlflow.get_tracking_uri())
    if database is None:
        _get_store()  # type: ignore[no-untyped-call]
        return
    with _exclusive(database.with_name(database.name + ".init-lock")):
        _get_store()  # type: ignore[no-untyped-call]  # MLflow caches the store per URI: the one made here is the one every later call uses
