"""Promotion on a tracking server with basic-auth: a READ-only user is refused, and nothing moves."""

from __future__ import annotations

import pytest

from tests.conftest import AUTH_ADMIN, run_cli
from tests.promote.conftest import WORSE, log_trained_run, register

pytestmark = pytest.mark.slow
ADMIN = AUTH_ADMIN
READER = {"MLFLOW_TRACKING_USERNAME": "reader", "MLFLOW_TRACKING_PASSWORD": "reader-secret-1"}


@pytest.fixture
def auth_server(basic_auth_server):
    return basic_auth_server


def test_read_only_user_cannot_promote(auth_server, tiny_checkpoint, monkeypatch):
    from mlflow.server import get_app_client
    from mlflow.tracking import MlflowClient

    for key, value in ADMIN.items():
        monkeypatch.setenv(key, value)
    run = log_trained_run(tiny_checkpoint, WORSE)
    register("bt-auth", run)
    register("bt-auth", run, eval_caption_match_accuracy="0.5")  # as if retrained: a better tagged value
    assert run_cli(["promote", "--model-name", "bt-auth", "--candidate", "1"]).returncode == 0
    get_app_client("basic-auth", tracking_uri=auth_server.url).create_user(
        READER["MLFLOW_TRACKING_USERNAME"], READER["MLFLOW_TRACKING_PASSWORD"])
    before = MlflowClient().get_model_version("bt-auth", "2").tags

    refused = run_cli(["promote", "--model-name", "bt-auth"], env_extra=READER)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("error: model-name: no permission to change registered model 'bt-auth' "
                                     "(PERMISSION_DENIED"), refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    anonymous = run_cli(["promote", "--model-name", "bt-auth"],
                        env_extra={"MLFLOW_TRACKING_USERNAME": "", "MLFLOW_TRACKING_PASSWORD": ""})
    assert anonymous.returncode == 2 and "(UNAUTHENTICATED" in anonymous.stderr, anonymous.stderr
    assert len(anonymous.stderr.strip().splitlines()) == 1

    client = MlflowClient()
    assert client.get_registered_model("bt-auth").aliases == {"champion": "1"}
    assert client.get_model_version("bt-auth", "2").tags == before
    done = run_cli(["promote", "--model-name", "bt-auth"])  # the admin may
    assert done.returncode == 0 and "now holds @champion (was version 1)" in done.stdout, done.stderr
    assert client.get_registered_model("bt-auth").aliases == {"champion": "2"}
