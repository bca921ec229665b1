"""The promotion lock on a real basic-auth tracking server with two users (issue 31), each promoter a real process.

Before: a stale lock the user may not delete (another user's lock model: no MANAGE) made `promote` spin without
sleeping and without reaching its deadline; a holder paused past the staleness limit applied its decision anyway
and then deleted its successor's lock; staleness compared this host's wall clock with the server's timestamp, so
a host whose clock ran ahead took over a live holder's lock.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.promote import lock

from tests.conftest import AUTH_ADMIN, REPO, MlflowServer

pytestmark = pytest.mark.slow
USERS = {"ann": "ann-Pw-4410-secret", "bob": "bob-Pw-8823-secret"}
FAST = {"STALE_S": 2.0, "BEAT_S": 0.5}  # a stale limit a test can wait out
_models = itertools.count(1)

# One promoter process. "hold": take the lock, say so, wait for a line on stdin (the promotion's body), then
# check the lock is still held and move the alias. "promote": the real CLI command.
PROMOTER = """
import json, sys, time
plan = json.loads(sys.argv[1])
if plan.get("clock_ahead_s"):  # a host whose wall clock runs ahead of the tracking server's
    real_time = time.time
    time.time = lambda: real_time() + plan["clock_ahead_s"]
from bridgetower_mlflow.promote import lock
for key, value in plan.get("lock", {}).items():
    setattr(lock, key, value)
if plan["mode"] == "promote":
    from bridgetower_mlflow.cli import main
    main(["promote", "--model-name", plan["model"], "--candidate", plan["candidate"]])
from mlflow.tracking import MlflowClient
client = MlflowClient()
with lock.promotion_lock(client, plan["model"]) as held:
    print("held", flush=True)
    sys.stdin.readline()
    if held is not None:
        held.confirm()
    client.set_registered_model_alias(plan["model"], "champion", plan["candidate"])
    print("applied", flush=True)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`mlflow server --app-name basic-auth` (default permission READ) with users ann and bob."""
    from mlflow.server.auth.client import AuthServiceClient

    folder = tmp_path_factory.mktemp("lock-auth")
    config = folder / "basic_auth.ini"
    config.write_text("[mlflow]\ndefault_permission = READ\n"
                      f"database_uri = sqlite:///{folder / 'basic_auth.db'}\nadmin_username = admin\n"
                      "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
                      "auth_cache_ttl_seconds = 600\n")
    env = {"MLFLOW_FLASK_SERVER_SECRET_KEY": "flask-key-for-tests", "MLFLOW_AUTH_CONFIG_PATH": str(config),
           "MLFLOW_AUTH_ADMIN_PASSWORD": AUTH_ADMIN["MLFLOW_TRACKING_PASSWORD"]}
    running = MlflowServer(f"sqlite:///{folder / 'server.db'}", folder / "artifacts",
                           extra=["--app-name", "basic-auth"], env=env).start()
    os.environ.update(AUTH_ADMIN)  # the admin's client, for the user store
    try:
        for user, password in USERS.items():
            AuthServiceClient(running.url).create_user(user, password)
    finally:
        for key in AUTH_ADMIN:
            os.environ.pop(key)
    yield running
    running.stop()


def _as(user: str) -> dict:
    password = AUTH_ADMIN["MLFLOW_TRACKING_PASSWORD"] if user == "admin" else USERS[user]
    return {"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password}


@pytest.fixture
def model(server, monkeypatch):
    """A model the admin registered (v1 holds @champion; v2, v3) that ann and bob may edit."""
    from mlflow.server.auth.client import AuthServiceClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    for key, value in _as("admin").items():
        monkeypatch.setenv(key, value)
    name, client = f"bt-lock-{next(_models)}", MlflowClient(server.url)
    client.create_registered_model(name)
    for value in ("0.5", "0.7", "0.6"):
        client.create_model_version(name, "s3://nowhere/model", tags={
            "eval_caption_match_accuracy": value, "dataset.eval_fingerprint": "c8cf8c869ecd855d"})
    client.set_registered_model_alias(name, "champion", "1")
    for user in USERS:
        AuthServiceClient(server.url).grant_user_permission(user, "registered_model", name, "EDIT")
    return client, name


def _start(server, user: str, plan: dict) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_TRACKING_URI": server.url, **_as(user)}
    return subprocess.Popen([sys.executable, "-c", PROMOTER, json.dumps(plan)], env=env, cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _holding(process: subprocess.Popen) -> None:
    line = process.stdout.readline()  # blocks until the promoter holds the lock (or exits)
    assert line == "held\n", (line, process.poll(), process.stderr.read() if process.poll() is not None else "")


def _finish(process: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"the promoter did not end within {timeout} s (spinning?): {err[-2000:]}") from None


def _lock(client, name):
    models = {m.name: m for m in client.search_registered_models(max_results=1000)}
    return models.get(lock.lock_name(name))


def test_a_crashed_holders_lock_another_user_may_not_delete_is_one_line_not_a_spin(server, model):
    client, name = model
    crashed = _start(server, "ann", {"mode": "hold", "model": name, "candidate": "3", "lock": FAST})
    _holding(crashed)
    crashed.kill()  # SIGKILL: the lock model stays behind, and only ann (or an admin) may delete it
    crashed.wait()
    other_user = _start(server, "bob", {"mode": "promote", "model": name, "candidate": "2",
                                        "lock": {**FAST, "WAIT_S": 30.0}})
    out, err = _finish(other_user)
    assert other_user.returncode == 2, err[-3000:]
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err[-3000:]
    assert err.startswith(f"error: model-name: the promotion lock '{name}--promotion-lock' (held by ") and \
        f"pid {crashed.pid}, tracking user ann since" in err and \
        "this user may not delete it (PERMISSION_DENIED" in err and "its owner or an admin deletes" in err, err
    assert client.get_registered_model(name).aliases == {"champion": "1"}  # nothing moved
    admin = _start(server, "admin", {"mode": "promote", "model": name, "candidate": "2", "lock": FAST})
    out, err = _finish(admin)
    assert admin.returncode == 0 and "took over the promotion lock" in err, err[-3000:]
    assert client.get_registered_model(name).aliases == {"champion": "2"} and _lock(client, name) is None


def test_a_slow_holder_changes_nothing_and_leaves_its_successors_lock(server, model):
    client, name = model
    slow = _start(server, "ann", {"mode": "hold", "model": name, "candidate": "3", "lock": FAST})
    _holding(slow)
    os.kill(slow.pid, signal.SIGSTOP)  # paused past the stale limit: a VM pause, a swap storm, a laptop lid
    try:
        successor = _start(server, "ann", {"mode": "hold", "model": name, "candidate": "2", "lock": FAST})
        _holding(successor)  # it took the silent lock over
    finally:
        os.kill(slow.pid, signal.SIGCONT)
    slow.stdin.write("go on\n")
    slow.stdin.flush()
    _, err = _finish(slow)
    assert slow.returncode != 0 and "was taken over while this promotion ran" in err, err[-3000:]
    assert client.get_registered_model(name).aliases == {"champion": "1"}  # the slow one applied nothing
    held = _lock(client, name)
    assert held is not None and re.search(rf"pid {successor.pid}\b", held.tags[lock.OWNER_TAG])  # not deleted
    successor.stdin.write("go on\n")
    successor.stdin.flush()
    out, err = _finish(successor)
    assert successor.returncode == 0 and out.endswith("applied\n"), err[-3000:]
    assert client.get_registered_model(name).aliases == {"champion": "2"} and _lock(client, name) is None


def test_a_live_holder_is_not_taken_over_by_a_host_whose_clock_runs_ahead(server, model):
    client, name = model
    live = _start(server, "ann", {"mode": "hold", "model": name, "candidate": "3", "lock": {"BEAT_S": 0.5}})
    _holding(live)
    try:
        ahead = _start(server, "ann", {"mode": "promote", "model": name, "candidate": "2", "clock_ahead_s": 3600,
                                       "lock": {"WAIT_S": 3.0}})
        _, err = _finish(ahead)
        assert ahead.returncode == 2 and f"error: model-name: another promotion of '{name}' is in progress" in err, \
            err[-3000:]
        held = _lock(client, name)
        assert held is not None and re.search(rf"pid {live.pid}\b", held.tags[lock.OWNER_TAG])
    finally:
        live.stdin.write("go on\n")
        live.stdin.flush()
    out, err = _finish(live)
    assert live.returncode == 0 and out.endswith("applied\n"), err[-3000:]
    assert client.get_registered_model(name).aliases == {"champion": "3"} and _lock(client, name) is None
