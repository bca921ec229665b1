"""Training against a basic-auth server: credentials only from MLflow's own sources, never leaked."""


import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import AUTH_ADMIN, run_cli

pytestmark = pytest.mark.slow
READER = {"MLFLOW_TRACKING_USERNAME": "reader", "MLFLOW_TRACKING_PASSWORD": "reader-Pw-5519-secret"}
TOKEN = "hf_" + "Zq8" * 12  # a Hub token in the environment must not leak either
TRAIN = ["train", "--max-steps", "4", "--logging-steps", "2", "--per-device-train-batch-size", "8",
         "--dataloader-num-workers", "0", "--experiment-name", "shared", "--register-as", "bt-auth-train"]


def _leaks(folder, secrets) -> list[str]:
    """Files under `folder` (store, artifacts, logs) that contain any secret value."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {s[:4]}..." for s in secrets if s.encode() in data]
    return found


def test_admin_trains_with_env_credentials_and_no_secret_is_stored(cache_dir, basic_auth_server, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)  # the way in for a Hub token (hf_args refuses one: test_secrets.py)
    done = run_cli(TRAIN, env_extra=AUTH_ADMIN)
    assert done.returncode == 0, done.stderr[-3000:]
    secrets = [AUTH_ADMIN["MLFLOW_TRACKING_PASSWORD"], TOKEN]
    (tmp_path / "cli.log").write_text(done.stdout + done.stderr)
    assert _leaks(tmp_path, secrets) == []  # server db, artifacts, outputs, logs
    for key, value in AUTH_ADMIN.items():
        monkeypatch.setenv(key, value)
    run = MlflowClient().search_runs([MlflowClient().get_experiment_by_name("shared").experiment_id])[0]
    assert run.data.params["hub_token"] == "***" and run.info.status == "FINISHED"


def test_credentials_file_works_and_read_only_user_cannot_log(cache_dir, basic_auth_server, tmp_path,
                                                               monkeypatch):
    from mlflow.server import get_app_client

    home = tmp_path / "home"
    (home / ".mlflow").mkdir(parents=True)
    (home / ".mlflow" / "credentials").write_text(
        "[mlflow]\nmlflow_tracking_username = admin\n"
        f"mlflow_tracking_password = {AUTH_ADMIN['MLFLOW_TRACKING_PASSWORD']}\n")
    first = run_cli(TRAIN[:-2], env_extra={"HOME": str(home)})  # credentials from the file only
    assert first.returncode == 0, first.stderr[-3000:]
    for key, value in AUTH_ADMIN.items():
        monkeypatch.setenv(key, value)
    get_app_client("basic-auth", tracking_uri=basic_auth_server.url).create_user(**{
        "username": READER["MLFLOW_TRACKING_USERNAME"], "password": READER["MLFLOW_TRACKING_PASSWORD"]})
    refused = run_cli(TRAIN[:-2], env_extra=READER)
    assert refused.returncode == 2, refused.stderr[-3000:]
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("error: tracking: permission denied to start the run at http") and "for reader" in last, last
    assert READER["MLFLOW_TRACKING_PASSWORD"] not in refused.stderr + refused.stdout
    client = MlflowClient()
    runs = client.search_runs([client.get_experiment_by_name("shared").experiment_id])
    assert [r.info.status for r in runs] == ["FINISHED"]
    assert _leaks(tmp_path, [AUTH_ADMIN["MLFLOW_TRACKING_PASSWORD"], READER["MLFLOW_TRACKING_PASSWORD"]]) == \
        [f"{home / '.mlflow' / 'credentials'}: {AUTH_ADMIN['MLFLOW_TRACKING_PASSWORD'][:4]}..."]
