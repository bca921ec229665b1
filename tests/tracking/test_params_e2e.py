"""Params end to end, one tiny real run: a value over MLflow's limit is kept whole in params_full.json,
and tokens in the environment reach no param, tag, artifact, output file nor printed line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.contract import MAX_PARAM_VALUE, PARAMS_FILE

from tests.conftest import no_running_runs, run_cli

pytestmark = pytest.mark.slow
TOKEN = "hf_" + "Wm3" * 12
ENV_SECRETS = {"HF_TOKEN": TOKEN, "HUGGING_FACE_HUB_TOKEN": TOKEN, "AWS_SECRET_ACCESS_KEY": "aws-" + "Zr9" * 10}
LONG_ID = "org/" + "m" * 7000  # over MLflow's 6000-character param limit


def _files_holding(folder: Path, secrets) -> list[str]:
    files = [path for path in folder.rglob("*") if path.is_file()]
    return [f"{path}: {s[:4]}..." for path in files for s in secrets if s.encode() in path.read_bytes()]


def test_long_values_are_kept_whole_and_environment_secrets_never_recorded(cache_dir, sqlite_uri, tmp_path):
    done = run_cli(["train", "--max-steps", "4", "--logging-steps", "2", "--per-device-train-batch-size", "8",
                    "--dataloader-num-workers", "0", "--log-model", "false", "--max-eval-samples", "16",
                    "--experiment-name", "params", "--hf-args", f"--hub_model_id {LONG_ID}"], env_extra=ENV_SECRETS)
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(sqlite_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("params").experiment_id])
    assert run.info.status == "FINISHED" and no_running_runs(sqlite_uri) == []
    params = run.data.params
    full = json.loads(Path(client.download_artifacts(run.info.run_id, PARAMS_FILE, str(tmp_path))).read_text())
    for key, whole in (("hub_model_id", LONG_ID), ("hf_args", f"--hub_model_id {LONG_ID}")):
        assert len(params[key]) <= MAX_PARAM_VALUE and f"[{len(whole)} chars: {PARAMS_FILE}]" in params[key]
        assert whole.startswith(params[key].split("...[")[0]) and full[key] == whole
    assert set(params) <= set(full) and params["hub_token"] == full["hub_token"] == "***"
    assert all(full[k] == v for k, v in params.items() if "..." not in v)  # nothing else was shortened

    (tmp_path / "printed.log").write_text(done.stdout + done.stderr)
    secrets = list(ENV_SECRETS.values())
    # the store, its artifacts, the output folder and what was printed; the session's spill files too
    assert _files_holding(tmp_path, secrets) + _files_holding(cache_dir / "spill", secrets) == []
    assert all(s not in json.dumps([run.data.tags, params]) for s in secrets)
