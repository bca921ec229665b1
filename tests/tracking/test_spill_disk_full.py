"""The metric spill on a full disk (a real tmpfs): while the server answers nothing is lost and nothing is said;
when the server is away at the end and the records can be neither sent nor kept, the run's end is one line
(DiskFull, exit 1) naming the spill folder and how many records were not sent."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.errors import DiskFull
from bridgetower_mlflow.tracking.session import RunSession, spill_dir

from tests.support.small_disk import fill, small_disks


@pytest.fixture
def full_cache(tmp_path, monkeypatch):
    """The project's cache (the spill folder lives there) on a real 1 MB tmpfs with nothing left free."""
    with small_disks(tmp_path) as make:
        cache = make(1, "cache")
        (cache / "spill").mkdir()
        fill(cache)
        monkeypatch.setenv("BRIDGETOWER_MLFLOW_CACHE", str(cache))
        yield cache


@pytest.fixture
def server(mlflow_server):
    return mlflow_server  # conftest's real server for this test, MLFLOW_TRACKING_URI pointing at it


def test_a_full_spill_disk_costs_nothing_while_the_server_answers(full_cache, server):
    session = RunSession.start("spill-full", "answered", {})
    session.buffer.log_metrics({"loss": 1.0}, 1)
    session.buffer.persist()  # a checkpoint's persist: the disk refuses, the records stay queued
    assert session.finish("FINISHED", 60) == 0
    run = MlflowClient(server.url).get_run(session.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["loss"] == 1.0


def test_records_neither_sent_nor_kept_end_the_run_with_one_line(full_cache, server):
    session = RunSession.start("spill-full", "lost", {})
    session.buffer.log_metrics({"loss": 1.0, "eval_loss": 2.0}, 3)
    server.stop()  # away for good: the records (and the status) can only be spilled, and the disk is full
    with pytest.raises(DiskFull) as raised:
        session.finish("FINISHED", 1)
    line = str(raised.value)
    assert line.startswith("tracking: no space left on device for the metric spill (") and "records not sent)" in line
    assert f"in '{spill_dir()}'" in line and line.endswith("free space there"), line
    assert raised.value.exit_code == 1
