"""One layer of retries (issue 31): RunSession's phase-end calls (an artifact, a stale tag's removal) are one
call each. MLflow's client already retries what a server may answer later (429 and 5xx, with its backoff and
timeouts); RunSession wrapped that three times (an upload could block three times MLflow's minutes) and slept
1 + 2 + 4 s between and after the failures. Under MLflow's default retries and a real basic-auth server, a
refused upload is now one request and one warning line.
"""

from __future__ import annotations

import os
import time

from mlflow.server.auth.client import AuthServiceClient
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.tracking.session import RunSession

from tests.conftest import AUTH_ADMIN

READER = {"MLFLOW_TRACKING_USERNAME": "reader", "MLFLOW_TRACKING_PASSWORD": "reader-Pw-5521-secret"}


def _requests(server, method: str, path_part: str) -> int:
    """Requests the server's access log shows (uvicorn logs each one as it answers)."""
    log = server.artifacts.parent / f"server-{server.port}.log"
    return sum(1 for line in log.read_text().splitlines() if f'"{method} ' in line and path_part in line)


def _wait_for_requests(server, method: str, path_part: str) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        seen = _requests(server, method, path_part)
        if seen:
            return seen
        time.sleep(0.1)
    raise AssertionError(f"no {method} {path_part} in the server's access log after 30 s")


def test_a_refused_upload_and_tag_removal_are_one_request_each_and_a_warning(basic_auth_server, monkeypatch,
                                                                              tmp_path, caplog):
    monkeypatch.setenv("BRIDGETOWER_MLFLOW_CACHE", str(tmp_path / "cache"))
    for key, value in AUTH_ADMIN.items():
        monkeypatch.setenv(key, value)
    admin = MlflowClient(basic_auth_server.url)
    run_id = admin.create_run(admin.create_experiment("owned-by-admin"), tags={"error": "stale"}).info.run_id
    AuthServiceClient(basic_auth_server.url).create_user(READER["MLFLOW_TRACKING_USERNAME"],
                                                         READER["MLFLOW_TRACKING_PASSWORD"])
    for key, value in READER.items():  # a user with READ only (the server's default): it may not write here
        monkeypatch.setenv(key, value)
    assert os.environ["MLFLOW_TRACKING_USERNAME"] == "reader"
    session = RunSession(run_id, MlflowClient(basic_auth_server.url))
    try:
        session.log_dict({"phase": "fit"}, "phase.json")
        session.delete_tag("error")
    finally:
        session.buffer.close(timeout=1)
    assert _wait_for_requests(basic_auth_server, "PUT", f"{run_id}/artifacts/phase.json") == 1
    assert _wait_for_requests(basic_auth_server, "POST", "/runs/delete-tag") == 1
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("could not ")]
    assert len(warnings) == 2 and all("\n" not in w and "403" in w for w in warnings), warnings
    assert READER["MLFLOW_TRACKING_PASSWORD"] not in caplog.text
