"""The MLflow UI as users see it: real server, real sweep + compare, real Chromium via Playwright. The sweep's
experiment opens as model training: its kind tag, and the run link train prints lands in the Model training view
(MLflow 3.17.2 opens a bare link in its GenAI view, 'Evaluation runs' highlighted, whatever the tag says)."""

import os
import shutil
import subprocess

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.contract import EXPERIMENT_KIND_TAG, EXPERIMENT_KIND_TRAINING
from bridgetower_mlflow.tracking.links import runs_view_url

from tests.conftest import ARTIFACTS, BIN

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
SHOTS = ARTIFACTS / "ui"


@pytest.fixture
def browser_page():
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is missing: `make test` installs it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(90_000)
        yield page
        browser.close()


def _shown_metric(page, name: str) -> str:
    """The value the run page's metrics table shows for `name` (filtered through its search box)."""
    page.get_by_placeholder("Search metrics").fill(name)
    # the metrics table links each name to its chart; the description's own table has plain names
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=name, exact=True)).first
    row.wait_for()
    return row.inner_text().split()[-1]


def _sweep(server_url):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "MLFLOW_TRACKING_URI": server_url}
    args = [str(BIN / "bridgetower-mlflow"), "sweep", "--accel", "cpu", "--workers", "0,1", "--repeats", "1",
            "--experiment-name", "ui", "--max-steps", "5", "--per-device-train-batch-size", "8",
            "--", "--log-model", "false", "--max-eval-samples", "16"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


def test_sweep_and_compare_read_well_in_the_ui(cache_dir, mlflow_server, browser_page):
    _sweep(mlflow_server.url)
    client = MlflowClient(mlflow_server.url)
    experiment = client.get_experiment_by_name("ui").experiment_id
    (parent,) = client.search_runs([experiment], "tags.`bridgetower.run_kind` = 'sweep'")
    child = client.search_runs([experiment], "tags.`bridgetower.run_kind` = 'train'")[0]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser_page

    page.goto(f"{mlflow_server.url}/#/experiments/{experiment}/runs?workflowType=machine_learning")
    page.get_by_text("sweep cpu w0/1").first.wait_for()
    page.locator("button[data-component-id$='runnamecellrenderer.tsx_46']").first.click()  # expand the sweep
    page.get_by_text("cpu w1 decode=cpu r1").first.wait_for()
    page.get_by_text("cpu w0 decode=cpu r1").first.wait_for()
    page.screenshot(path=str(SHOTS / "runs-nested-sweep.png"))

    # the link train prints opens the run in the Model training view (wait for `load`, then the UI's redirects)
    assert client.get_experiment(experiment).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND_TRAINING
    page.goto(runs_view_url(experiment, child.info.run_id)[0], wait_until="load")
    page.get_by_text(child.info.run_name).first.wait_for()
    page.wait_for_timeout(3000)
    sidebar = page.locator("nav").first.inner_text().splitlines()
    assert "Models" in sidebar and "Evaluation runs" not in sidebar, sidebar  # not GenAI's run list
    page.screenshot(path=str(SHOTS / "train-run-training-view.png"))
    for tag in ("accelerator.device_name", "data_loader", "input_bound", "accelerator.count"):  # chips "key: value"
        page.get_by_text(f"{tag}: {child.data.tags[tag]}", exact=True).first.wait_for()
    page.get_by_text("train_samples_per_second (first 3 steps excluded)").first.wait_for()  # the description
    page.screenshot(path=str(SHOTS / "train-run.png"), full_page=True)
    for metric in ("train_samples_per_second", "eval_loss", "dataloader_wait_fraction",
                   "train_phase_data_wait_fraction", "train_phase_forward_fraction", "train_step_seconds_p50"):
        shown = _shown_metric(page, metric)  # the UI rounds long values (to 4 decimals): within half a last digit
        half_digit = 0.5 * 10 ** -len(shown.partition(".")[2])
        assert float(shown) == pytest.approx(child.data.metrics[metric], abs=half_digit * 1.001), (metric, shown)

    page.goto(f"{mlflow_server.url}/#/experiments/{experiment}/runs/{parent.info.run_id}")
    page.get_by_text("Data-loading speedup").first.wait_for()  # the compare table is the note
    page.screenshot(path=str(SHOTS / "sweep-run-report.png"), full_page=True)

    page.goto(f"{mlflow_server.url}/#/experiments/{experiment}/runs/{parent.info.run_id}/artifacts")
    page.get_by_text("compare", exact=True).first.click()
    for chart in ("throughput.png", "speedups.png"):
        page.get_by_text(chart, exact=True).first.click()
        page.get_by_text(f"compare/{chart}").first.wait_for()
        image = page.locator("img[src^='blob:']").first  # the artifact viewer renders the file as a blob
        image.wait_for()
        assert image.evaluate("img => img.naturalWidth") > 200
        page.screenshot(path=str(SHOTS / f"compare-{chart}"))
