"""compare end to end through its click command, on a real sqlite store."""

import json

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.compare.command import compare_command
from bridgetower_mlflow.compare.flow import CompareOptions, run_compare, ui_links
from bridgetower_mlflow.compare.read.scope import CompareScope
from bridgetower_mlflow.compare.read.train_runs import fetch_run_records

from tests.fakes.synthetic_runs import TrainRunSpec, log_study_runs, log_train_run


@pytest.fixture
def store(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("bench", artifact_location=str(tmp_path / "artifacts"))
    return client, experiment_id


def _compare_runs(client, experiment_id):
    return client.search_runs([experiment_id], "tags.`bridgetower.run_kind` = 'compare'")


def test_compare_logs_a_compare_run_with_artifacts_and_markdown_description(store, tmp_path):
    client, experiment_id = store
    log_study_runs(client, experiment_id)
    result = CliRunner().invoke(compare_command, ["--experiment-name", "bench", "--baseline", "h100",
                                                  "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "1.28x" in result.output and "1.41x" in result.output
    (run,) = _compare_runs(client, experiment_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["mlflow.note.content"].startswith("# BridgeTower throughput comparison")
    assert "| w2 decode=cpu |" in run.data.tags["mlflow.note.content"]
    names = {a.path for a in client.list_artifacts(run.info.run_id, "compare")}
    assert names == {f"compare/{n}" for n in ("report.md", "report.txt", "speedups.csv", "speedups.json",
                                               "quality.csv", "headline.csv",  # the runs logged final eval metrics
                                               "throughput.png", "speedups.png", "tables")}  # no target: no race
    tables = {a.path for a in client.list_artifacts(run.info.run_id, "compare/tables")}
    assert tables == {"compare/tables/cells.json", "compare/tables/headline.json",
                      "compare/tables/quality.json"}  # no devices swept: no scaling
    document = json.loads((tmp_path / "out" / "speedups.json").read_text())
    assert document["run_count"] == 10
    assert (tmp_path / "out" / "throughput.png").read_bytes()[:4] == b"\x89PNG"


def test_extra_filter_with_and_narrows_the_runs(store):
    client, experiment_id = store
    log_study_runs(client, experiment_id)
    options = CompareOptions(experiment_names=("bench",), log_to_mlflow=False,
                             filter_string="tags.accelerator = 'h100' AND params.dataloader_num_workers = '2'")
    outcome = run_compare(options, client)
    assert outcome.comparison.run_count == 1


def test_compare_runs_are_not_compared_again(store):
    client, experiment_id = store
    log_study_runs(client, experiment_id)
    for _ in range(2):
        outcome = run_compare(CompareOptions(experiment_names=("bench",)), client)
        assert outcome.comparison.run_count == 10
    assert len(_compare_runs(client, experiment_id)) == 2


def test_nothing_matching_names_experiments_and_accelerators_and_exits_2(store):
    client, experiment_id = store
    log_train_run(client, experiment_id, TrainRunSpec("gaudi2", 700.0))
    log_train_run(client, experiment_id, TrainRunSpec("h100", 1.0, status="FAILED"))
    result = CliRunner().invoke(compare_command, ["--experiment-name", "bench", "--no-log", "--filter",
                                                  "params.model = 'tiny' AND tags.accelerator = 'h100'"])
    assert result.exit_code == 2
    assert "bench (" in result.stderr and "gaudi2, h100" in result.stderr
    assert result.stderr.startswith("error: no finished train runs match")
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_experiment_and_bad_options_are_config_errors(store):
    runner = CliRunner()
    missing = runner.invoke(compare_command, ["--experiment-name", "nope", "--no-log"])
    assert missing.exit_code == 2 and "existing experiments: Default, bench" in missing.stderr
    bad = runner.invoke(compare_command, ["--experiment-name", "bench", "--reference", "blog"])
    assert bad.exit_code == 2 and "reference" in bad.stderr
    bad_filter = runner.invoke(compare_command, ["--experiment-name", "bench", "--filter", "params.a = 1 OR b"])
    assert bad_filter.exit_code == 2 and bad_filter.stderr.startswith("error: filter: invalid value")


def test_under_mlflow_run_the_existing_run_becomes_the_compare_run(store, monkeypatch):
    client, experiment_id = store
    log_study_runs(client, experiment_id)
    project_run = client.create_run(experiment_id).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", project_run)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", experiment_id)
    result = CliRunner().invoke(compare_command, [])
    assert result.exit_code == 0, result.output
    tags = client.get_run(project_run).data.tags
    assert tags["bridgetower.run_kind"] == "compare" and tags["compare.run_count"] == "10"
    assert [r.info.run_id for r in _compare_runs(client, experiment_id)] == [project_run]


def test_paging_and_server_side_filters():
    calls = []

    class PagedClient:
        def search_runs(self, experiment_ids, filter_string, max_results, page_token):
            calls.append((filter_string, max_results, page_token))
            page = type("Page", (list,), {})()
            first_finished = page_token is None and "FINISHED'" in filter_string and "!=" not in filter_string
            page.token = "next" if first_finished else None
            return page

    fetch_run_records(PagedClient(), ["1"], "params.model = 'large'")
    assert [c[2] for c in calls] == [None, "next", None]
    assert all(c[1] >= 1000 for c in calls)
    assert all("tags.`bridgetower.run_kind` = 'train'" in c[0] and "params.model = 'large'" in c[0] for c in calls)
    assert "attributes.status = 'FINISHED'" in calls[0][0] and "attributes.status != 'FINISHED'" in calls[2][0]


def test_ui_link_points_at_the_runs_view_for_http_servers():
    class HttpClient:
        tracking_uri = "http://127.0.0.1:5000/"

    links = ui_links(HttpClient(), CompareScope({"7": "bench"}, ""), None)
    assert links == ["http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning"]
