"""Empty sqlite tracking stores that skip MLflow's migration: each test's store is a copy of one that was migrated
once per test process (the migration costs 1.6 s of CPU, and the suite makes a store for a hundred tests).

The copy holds no experiment, so its first opener makes the Default experiment with its own artifact root, as it
would on a fresh file. Tests of a fresh store (its schema made by one of two racing processes) make their own.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import shutil
import sqlite3
import tempfile
from pathlib import Path


@functools.cache
def _template() -> Path:
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    folder = Path(tempfile.mkdtemp(prefix="bridgetower-empty-store-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "empty.db"
    SqlAlchemyStore(f"sqlite:///{path}", str(folder / "artifacts")).engine.dispose()
    with contextlib.closing(sqlite3.connect(path)) as database, database:
        database.execute("DELETE FROM experiments")  # its Default experiment points into this folder
    return path


def empty_store(path: Path) -> str:
    """A migrated store with no experiment at `path` (which must not exist); its sqlite URI."""
    if path.exists():
        raise FileExistsError(path)
    shutil.copyfile(_template(), path)
    return f"sqlite:///{path}"
