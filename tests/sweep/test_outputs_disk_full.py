"""sweep's and compare's own writes on a full disk (real tmpfs folders): one line naming what was being written
and where, exit status 1 (an environment failure), and no run of theirs left RUNNING."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.compare.command import compare_command
from bridgetower_mlflow.sweep.command import sweep_command

from tests.conftest import no_running_runs
from tests.fakes.synthetic_runs import log_study_runs
from tests.support.small_disk import fill, small_disks
from tests.sweep.test_sweep import FAKE_TRAIN


@pytest.fixture
def full_disk(tmp_path):
    """A real 1 MB tmpfs with nothing left free."""
    with small_disks(tmp_path) as make:
        folder = make(1, "full")
        fill(folder)
        yield folder


def _store(tmp_path, monkeypatch, artifacts: Path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)
    return uri, client, client.create_experiment("bench", artifact_location=str(artifacts))


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_compare_outputs_on_a_full_disk_are_one_line(tmp_path, monkeypatch, full_disk):
    uri, client, experiment_id = _store(tmp_path, monkeypatch, tmp_path / "artifacts")
    log_study_runs(client, experiment_id)
    out = full_disk / "report"
    result = CliRunner().invoke(compare_command, ["--experiment-name", "bench", "--no-log", "--output-dir", str(out)])
    assert result.exit_code == 1, result.output
    line = _one_error_line(result)
    assert line.startswith(f"error: output_dir: no space left on device for the comparison's report, tables and "
                           f"charts in '{out}'"), line
    assert "free space there" in line


def test_a_gate_file_on_a_full_disk_is_one_line_and_exit_1(tmp_path, monkeypatch, full_disk):
    uri, client, experiment_id = _store(tmp_path, monkeypatch, tmp_path / "artifacts")
    log_study_runs(client, experiment_id)
    gate = full_disk / "gate.json"
    result = CliRunner().invoke(compare_command, ["--experiment-name", "bench", "--no-log", "--write-gate", str(gate)])
    assert result.exit_code == 1, result.output  # not bad input (exit 2): the path is fine, the disk is full
    assert _one_error_line(result).startswith(f"error: write_gate: no space left on device for the gate file in "
                                              f"'{full_disk}'")


def test_compare_artifacts_on_a_full_file_store_fail_their_run(tmp_path, monkeypatch, full_disk):
    uri, client, experiment_id = _store(tmp_path, monkeypatch, full_disk / "artifacts")
    log_study_runs(client, experiment_id)
    result = CliRunner().invoke(compare_command, ["--experiment-name", "bench"])
    assert result.exit_code == 1, result.output
    line = _one_error_line(result)
    assert line.startswith("error: tracking: no space left on device for the comparison's artifacts in "), line
    assert str(full_disk) in line
    (run,) = client.search_runs([experiment_id], "tags.`bridgetower.run_kind` = 'compare'")
    assert run.info.status == "FAILED" and run.data.tags["error"] == line.removeprefix("error: ")
    assert no_running_runs(uri) == []


def test_sweep_notes_on_a_full_file_store_fail_the_sweep_in_one_line(tmp_path, monkeypatch, full_disk):
    uri, client, experiment_id = _store(tmp_path, monkeypatch, full_disk / "artifacts")
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    monkeypatch.setenv("BRIDGETOWER_TRAIN_CMD", f"{sys.executable} {script}")
    monkeypatch.setenv("FAKES_DIR", str(Path(__file__).parents[1]))  # tests/, which holds fakes/
    result = CliRunner().invoke(sweep_command, ["--accel", "cpu", "--workers", "0", "--repeats", "1",
                                                "--device-decode", "false", "--experiment-name", "bench"])
    assert result.exit_code == 1, result.output
    line = _one_error_line(result)
    assert line.startswith("error: tracking: no space left on device for the sweep's notes in "), line
    (parent,) = client.search_runs([experiment_id], "tags.`bridgetower.run_kind` = 'sweep'")
    assert parent.info.status == "FAILED" and parent.data.tags["error"] == line.removeprefix("error: ")
    children = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert [run.info.status for run in children] == ["FINISHED"]  # the cell trained and was recorded
    assert no_running_runs(uri) == []
