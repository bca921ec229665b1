"""One promoter at a time per registered model: read-decide-apply runs under `<name>--promotion-lock`.

Creating a registered model is atomic on database stores (sqlite, PostgreSQL, MySQL, and a tracking
server over any of them: the name is a unique key), so creating the lock model acquires it and
deleting it releases it. The lock names its holder and carries a token only this acquisition knows;
while the holder works it rewrites a heartbeat tag every BEAT_S.

A waiter takes a lock over only after seeing it unchanged for STALE_S on its own monotonic clock: no
host's wall clock is compared with another's or with the server's. A stale lock this user may not
delete (mlflow[auth]: another user's lock model) is refused in one line at once, never spun on. A
holder checks the lock is still its own before it applies and before it deletes: one paused past
STALE_S changes nothing and leaves its successor's lock alone. MLflow's file store checks and creates
in two steps, so there two promoters starting in the same instant may both win.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ..environment import tracking_user
from ..errors import TrackingError
from ..redact import first_line

if TYPE_CHECKING:
    from mlflow.entities.model_registry import RegisteredModel
    from mlflow.tracking import MlflowClient

log = logging.getLogger(__name__)
LOCK_SUFFIX = "--promotion-lock"
OWNER_TAG, SINCE_TAG = "promotion_lock.owner", "promotion_lock.since"
TOKEN_TAG, BEAT_TAG = "promotion_lock.token", "promotion_lock.heartbeat"
WAIT_S = 60.0  # how long a promoter waits for another one to finish
STALE_S = 30.0  # a lock seen unchanged this long (no heartbeat) was left by a promoter that died: taken over
BEAT_S = 5.0  # the holder's heartbeat
POLL_S = 0.5
LockState = tuple[int | None, str | None, str | None]  # created at, token, heartbeat


def lock_name(model_name: str) -> str:
    return model_name + LOCK_SUFFIX


def is_lock(name: str) -> bool:
    return name.endswith(LOCK_SUFFIX)


def _owner() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        user = "unknown"
    login = tracking_user()  # who may delete the lock model under mlflow[auth]
    return f"{user}@{socket.gethostname()} pid {os.getpid()}" + (f", tracking user {login}" if login else "")


def _try_acquire(client: MlflowClient, name: str, token: str) -> bool:
    from mlflow.exceptions import MlflowException

    owner, since = _owner(), datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        client.create_registered_model(name, tags={OWNER_TAG: owner, SINCE_TAG: since, TOKEN_TAG: token,
                                                   BEAT_TAG: "0"}, description=f"held by {owner} since {since}")
        return True
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_ALREADY_EXISTS":
            return False
        raise


def _current(client: MlflowClient, name: str) -> RegisteredModel | None:
    """The lock as it is now, or None when it was released meanwhile."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_registered_model(name)
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise


def _held_by(lock: RegisteredModel) -> str:
    tags = lock.tags or {}
    return f"held by {tags.get(OWNER_TAG, 'an unknown promoter')} since {tags.get(SINCE_TAG, '?')}"


def _state(lock: RegisteredModel) -> LockState:
    """What changes while its holder lives: a new lock, or a heartbeat."""
    tags = lock.tags or {}
    return lock.creation_timestamp, tags.get(TOKEN_TAG), tags.get(BEAT_TAG)


class _Silence:
    """How long (on this host's monotonic clock) the lock has been seen without a change."""

    def __init__(self) -> None:
        self.state: LockState | None = None
        self.since = 0.0

    def of(self, lock: RegisteredModel) -> float:
        if _state(lock) != self.state:
            self.state, self.since = _state(lock), time.monotonic()
        return time.monotonic() - self.since


def _take_over(client: MlflowClient, name: str, lock: RegisteredModel) -> bool:
    """Delete the stale lock seen (not a newer one of the same name); True when it is gone."""
    from mlflow.exceptions import MlflowException

    again = _current(client, name)
    if again is None:
        return True
    if _state(again) != _state(lock):
        return False
    try:
        client.delete_registered_model(name)
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return True
        raise TrackingError(f"model-name: the promotion lock {name!r} ({_held_by(lock)}) has been unchanged for "
                            f"{STALE_S:g} s, its promoter gone, and this user may not delete it "
                            f"({exc.error_code}: {first_line(exc)}); allowed: its owner or an admin deletes "
                            f"registered model {name!r}, then promote again") from None
    log.warning("took over the promotion lock %r (%s): unchanged for %g s", name, _held_by(lock), STALE_S)
    return True


class HeldLock:
    """The lock this promoter holds: it beats while held, and checks it is still its own."""

    def __init__(self, client: MlflowClient, name: str, token: str) -> None:
        self.client, self.name, self.token = client, name, token
        self._stop = threading.Event()
        self._beats = threading.Thread(target=self._beat, name="promotion-lock-heartbeat", daemon=True)
        self._beats.start()

    def _beat(self) -> None:
        count, warned = 0, False
        while not self._stop.wait(BEAT_S):
            count += 1
            try:
                if not self.still_ours():
                    return
                self.client.set_registered_model_tag(self.name, BEAT_TAG, str(count))
            except Exception as exc:  # noqa: BLE001 - a missed beat only brings a takeover nearer
                if not warned:
                    log.warning("promotion lock %r: heartbeat failed (%s)", self.name, first_line(exc))
                warned = True

    def still_ours(self) -> bool:
        lock = _current(self.client, self.name)
        return lock is not None and (lock.tags or {}).get(TOKEN_TAG) == self.token

    def confirm(self) -> None:
        """Before applying: TrackingError when another promoter took the lock over meanwhile."""
        if not self.still_ours():
            raise TrackingError(f"model-name: the promotion lock {self.name!r} was taken over while this promotion "
                                f"ran (no heartbeat for {STALE_S:g} s: the process was paused or cut off); nothing "
                                "was changed; allowed: promote again")

    def release(self) -> None:
        """Delete the lock if it is still this promoter's (a successor's lock stays)."""
        from mlflow.exceptions import MlflowException

        self._stop.set()
        self._beats.join(timeout=30)
        try:
            if self.still_ours():
                self.client.delete_registered_model(self.name)
            else:
                log.warning("the promotion lock %r was taken over meanwhile: it is left to its new holder", self.name)
        except MlflowException as exc:  # the decision stands; a lock left behind is taken over when stale
            if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                log.warning("could not release the promotion lock %r (%s); it is taken over after %g s",
                            self.name, first_line(exc), STALE_S)


@contextmanager
def promotion_lock(client: MlflowClient, model_name: str) -> Iterator[HeldLock]:
    """Hold `<model_name>--promotion-lock` while the body runs (yields the HeldLock); TrackingError after WAIT_S."""
    name, token = lock_name(model_name), uuid.uuid4().hex
    deadline, silence = time.monotonic() + WAIT_S, _Silence()
    while not _try_acquire(client, name, token):
        lock = _current(client, name)
        if lock is not None and silence.of(lock) >= STALE_S and _take_over(client, name, lock):
            continue  # gone: try at once (a next lock needs STALE_S of silence again, so this never spins)
        if time.monotonic() >= deadline:
            held = _held_by(lock) if lock is not None else "released and taken again meanwhile"
            raise TrackingError(f"model-name: another promotion of {model_name!r} is in progress (lock {name!r} "
                                f"{held}); allowed: retry when it ends (a lock unchanged for {STALE_S:g} s is "
                                "taken over)")
        time.sleep(POLL_S)
    held_lock = HeldLock(client, name, token)
    try:
        yield held_lock
    finally:
        held_lock.release()
