"""One promoter at a time per registered model: read-decide-apply runs under `<name>--promotion-lock`.

Creating a registered model is atomic on database stores (sqlite, PostgreSQL, MySQL, and a tracking
server over any of them: the name is a unique key), so creating the lock model acquires it and
deleting it releases it. The lock records only who holds it and since when. MLflow's file store
checks and creates in two steps, so there two promoters starting in the same instant may both win.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import time
from contextlib import contextmanager
from datetime import datetime, timezone

from ..errors import TrackingError
from ..tracking.failures import first_line

log = logging.getLogger(__name__)
LOCK_SUFFIX = "--promotion-lock"
OWNER_TAG, SINCE_TAG = "promotion_lock.owner", "promotion_lock.since"
WAIT_S = 60.0  # how long a promoter waits for another one to finish
STALE_S = 300.0  # a lock this old was left by a promoter that died: it is taken over
POLL_S = 0.2


def lock_name(model_name: str) -> str:
    return model_name + LOCK_SUFFIX


def is_lock(name: str) -> bool:
    return name.endswith(LOCK_SUFFIX)


def _owner() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        user = "unknown"
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


def _try_acquire(client, name: str) -> bool:
    from mlflow.exceptions import MlflowException

    owner, since = _owner(), datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        client.create_registered_model(name, tags={OWNER_TAG: owner, SINCE_TAG: since},
                                       description=f"held by {owner} since {since}")
        return True
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_ALREADY_EXISTS":
            return False
        raise


def _current(client, name: str):
    """The lock as it is now, or None when it was released meanwhile."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_registered_model(name)
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise


def _held_by(lock) -> str:
    tags = lock.tags or {}
    return f"held by {tags.get(OWNER_TAG, 'an unknown promoter')} since {tags.get(SINCE_TAG, '?')}"


def _take_over_if_stale(client, name: str, lock) -> bool:
    """Delete a lock older than STALE_S (only the one seen: a fresh one of the same name stays)."""
    if time.time() - lock.creation_timestamp / 1000 < STALE_S:
        return False
    again = _current(client, name)
    if again is not None and again.creation_timestamp == lock.creation_timestamp:
        log.warning("taking over the stale promotion lock %r (%s)", name, _held_by(lock))
        _release(client, name)
    return True


def _release(client, name: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.delete_registered_model(name)
    except MlflowException as exc:  # the decision stands; a lock left behind goes stale
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            log.warning("could not release the promotion lock %r (%s); it is taken over after %g s",
                        name, first_line(exc), STALE_S)


@contextmanager
def promotion_lock(client, model_name: str):
    """Hold `<model_name>--promotion-lock` while the body runs; TrackingError after WAIT_S of waiting."""
    name = lock_name(model_name)
    deadline = time.monotonic() + WAIT_S
    while not _try_acquire(client, name):
        lock = _current(client, name)
        if lock is None or _take_over_if_stale(client, name, lock):
            continue
        if time.monotonic() >= deadline:
            raise TrackingError(f"model-name: another promotion of {model_name!r} is in progress (lock {name!r} "
                                f"{_held_by(lock)}); allowed: retry when it ends (a lock older than "
                                f"{STALE_S:g} s is taken over)")
        time.sleep(POLL_S)
    try:
        yield
    finally:
        _release(client, name)
