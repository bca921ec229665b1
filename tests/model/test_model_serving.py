"""The champion as a user gets it: pyfunc.load_model on a frame, and `mlflow models serve` over HTTP."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import urllib.request

import pandas as pd
import pytest

from bridgetower_mlflow.data.sample import default_sample_dir

from tests.conftest import BIN, free_port, run_cli, wait_http
from tests.promote.conftest import module_store, register, store, tiny_checkpoint, unique_name  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.gaudi_stack]
CHOICES = ["We said no boat on weekends.", "Honestly, the cat was here before the dog.", "I told you so."]


@pytest.fixture
def champion(store):
    """A registered version promoted to @champion through the real CLI; returns the model name."""
    name = unique_name("served")
    register(name, store.better)
    done = run_cli(["promote", "--model-name", name])
    assert done.returncode == 0, done.stderr
    assert f"{name} version 1 now holds @champion" in done.stdout
    return name


@pytest.fixture
def jpeg(cache_dir):
    return next((default_sample_dir() / "validation").glob("*.jpg"))


def test_pyfunc_predicts_on_paths_bytes_and_base64(champion, jpeg):
    import mlflow

    model = mlflow.pyfunc.load_model(f"models:/{champion}@champion")
    assert model.metadata.signature is not None
    assert model.metadata.get_input_schema().input_names() == ["image", "caption", "caption_choices"]
    raw = jpeg.read_bytes()
    frame = pd.DataFrame([
        {"image": str(jpeg), "caption": "A cartoon of a man.", "caption_choices": CHOICES},
        {"image": raw, "caption": "A cartoon of a man.", "caption_choices": CHOICES},
        {"image": base64.b64encode(raw).decode(), "caption": "A cartoon of a man.", "caption_choices": None},
        {"image": str(jpeg), "caption": None, "caption_choices": CHOICES[:2]},
    ])
    out = model.predict(frame)
    assert list(out.columns) == ["score", "best_choice", "choice_scores"]
    assert out["score"][:3].between(-1, 1).all() and pd.isna(out["score"][3])
    # one image in three encodings scores the same
    assert out["score"][0] == pytest.approx(out["score"][1], abs=1e-6) == pytest.approx(out["score"][2], abs=1e-6)
    assert out["choice_scores"][0] == pytest.approx(out["choice_scores"][1], abs=1e-6)
    assert len(out["choice_scores"][0]) == 3 and out["choice_scores"][2] == [] and len(out["choice_scores"][3]) == 2
    scores = out["choice_scores"][0]
    assert out["best_choice"][0] == scores.index(max(scores)) and out["best_choice"][2] == -1
    with pytest.raises(Exception, match="neither an existing file nor base64"):
        model.predict(pd.DataFrame([{"image": "no/such/file.jpg", "caption": "x"}]))


def _post(url: str, payload, content_type: str = "application/json") -> dict:
    body = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def test_models_serve_answers_http(champion, jpeg, tmp_path):
    port = free_port()
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    log = open(tmp_path / "serve.log", "w")
    server = subprocess.Popen([str(BIN / "mlflow"), "models", "serve", "-m", f"models:/{champion}@champion",
                               "--env-manager", "local", "-p", str(port), "--host", "127.0.0.1"],
                              stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/ping", timeout=180, process=server)
        image = base64.b64encode(jpeg.read_bytes()).decode()
        body = _post(f"http://127.0.0.1:{port}/invocations", {"dataframe_split": {
            "columns": ["image", "caption", "caption_choices"],
            "data": [[image, "A cartoon of a man.", CHOICES], [image, "A cartoon of a dog.", []]]}})
        # a CSV cell cannot hold a list: caption_choices travels as a JSON list; an empty cell is none
        csv = pd.DataFrame([{"image": image, "caption": "A cartoon of a man.", "caption_choices": json.dumps(CHOICES)},
                            {"image": image, "caption": "A cartoon of a dog.", "caption_choices": None}]).to_csv(
                                index=False)
        from_csv = _post(f"http://127.0.0.1:{port}/invocations", csv, "text/csv")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    first, second = body["predictions"]
    assert -1 <= first["score"] <= 1 and first["best_choice"] in (0, 1, 2) and len(first["choice_scores"]) == 3
    assert first["best_choice"] == first["choice_scores"].index(max(first["choice_scores"]))
    assert second["best_choice"] == -1 and -1 <= second["score"] <= 1
    csv_first, csv_second = from_csv["predictions"]
    assert csv_first["choice_scores"] == pytest.approx(first["choice_scores"], abs=1e-5)
    assert csv_first["best_choice"] == first["best_choice"] and csv_second["best_choice"] == -1
    assert csv_second["score"] == pytest.approx(second["score"], abs=1e-5) and csv_second["choice_scores"] == []
