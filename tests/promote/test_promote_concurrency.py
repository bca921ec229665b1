"""Concurrent promotions of one model: the second promoter decides against the first one's result.

Deterministic in-process race on a real sqlite registry: both promoters are held at a barrier right
after they read the holder, and the worse candidate writes last. Without the lock both read v1 and
the worse one wins; with it the second reads the holder the first one put there.
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.cli import main
from bridgetower_mlflow.errors import TrackingError
from bridgetower_mlflow.promote import lock, registry
from bridgetower_mlflow.promote.decision import Gate

GATE = Gate("champion", "eval_caption_match_accuracy", "max")
_names = itertools.count(1)


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory):
    return f"sqlite:///{tmp_path_factory.mktemp('race')}/mlflow.db"


@pytest.fixture
def model(store_uri, monkeypatch):
    """(client, name): v1 (0.5) holds @champion, v2 (0.7) and v3 (0.6); tagged as train tags its versions."""
    from mlflow.tracking import MlflowClient

    name = f"bt-race-{next(_names)}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri)
    client = MlflowClient(store_uri)
    client.create_registered_model(name)
    for value in ("0.5", "0.7", "0.6"):
        client.create_model_version(name, "file:///nowhere/model", tags={
            "eval_caption_match_accuracy": value, "dataset.eval_fingerprint": "c8cf8c869ecd855d"})
    client.set_registered_model_alias(name, "champion", "1")
    return client, name


def _lock_exists(client, name) -> bool:
    return any(m.name == lock.lock_name(name) for m in client.search_registered_models(max_results=1000))


def _wait_for_alias(client, name, version, timeout=30.0) -> None:
    """Until @champion is `version` (the other promotion wrote it); where it never is, the caller goes on."""
    deadline = time.monotonic() + timeout
    while client.get_registered_model(name).aliases.get("champion") != version and time.monotonic() < deadline:
        time.sleep(0.05)


def test_concurrent_promotions_end_on_the_best_version(model, monkeypatch):
    client, name = model
    barrier, real_decide = threading.Barrier(2), registry.decide

    def decide_after_both_read(candidate, holder, gate):
        try:
            barrier.wait(timeout=3)  # under the lock the other promoter never gets here: the barrier breaks
        except threading.BrokenBarrierError:
            pass
        if candidate.version == "3":  # without the lock, the worse candidate decides (on a stale holder) last
            _wait_for_alias(client, name, 2)
        return real_decide(candidate, holder, gate)

    monkeypatch.setattr(registry, "decide", decide_after_both_read)
    decisions, errors = {}, []

    def promote(version):
        if version == "3":  # start second: once v2 holds the lock, or after 1 s where nothing locks
            deadline = time.monotonic() + 1.0
            while not _lock_exists(client, name) and time.monotonic() < deadline:
                time.sleep(0.02)
        try:
            decisions[version] = registry.promote(name, version, GATE, client=client)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=promote, args=(v,)) for v in ("2", "3")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert client.get_registered_model(name).aliases == {"champion": 2}
    first, later = decisions["2"], decisions["3"]
    assert first.promote and first.holder.version == "1"
    assert not later.promote and later.holder.version == "2" and "vs 0.7 of version 2" in later.reason
    tags = client.get_model_version(name, "3").tags
    assert tags["promotion.decision"] == "not_promoted" and tags["promotion.previous_version"] == "2"
    assert not _lock_exists(client, name)


def test_a_held_lock_fails_clearly_after_waiting_and_changes_nothing(model, monkeypatch):
    client, name = model
    monkeypatch.setattr(lock, "WAIT_S", 0.5)
    client.create_registered_model(lock.lock_name(name), tags={lock.OWNER_TAG: "ann@box pid 7",
                                                                lock.SINCE_TAG: "2030-01-01T00:00:00+00:00"})
    result = CliRunner().invoke(main, ["promote", "--model-name", name, "--candidate", "2"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (f"error: model-name: another promotion of '{name}' is in progress (lock "
                             f"'{name}--promotion-lock' held by ann@box pid 7 since 2030-01-01T00:00:00+00:00); "
                             "allowed: retry when it ends (a lock unchanged for 30 s is taken over)\n")
    assert client.get_registered_model(name).aliases == {"champion": 1}
    assert "promotion.decision" not in client.get_model_version(name, "2").tags
    assert _lock_exists(client, name)  # not ours to delete


def test_a_stale_lock_is_taken_over(model, monkeypatch):
    client, name = model
    client.create_registered_model(lock.lock_name(name))
    monkeypatch.setattr(lock, "STALE_S", 0.0)
    decision = registry.promote(name, "2", GATE, client=client)
    assert decision.promote and client.get_registered_model(name).aliases == {"champion": 2}
    assert not _lock_exists(client, name)


def test_lock_is_released_on_error_and_dry_run_takes_none(model, monkeypatch):
    client, name = model
    seen = []
    monkeypatch.setattr(registry, "apply_decision", lambda *a: seen.append(_lock_exists(client, name)) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        registry.promote(name, "2", GATE, client=client)
    assert seen == [True] and not _lock_exists(client, name)
    monkeypatch.setattr(lock, "WAIT_S", 0.0)
    client.create_registered_model(lock.lock_name(name))
    assert registry.promote(name, "2", GATE, dry_run=True, client=client).promote  # no lock needed
    with pytest.raises(TrackingError, match="another promotion"):
        registry.promote(name, "2", GATE, client=client)
