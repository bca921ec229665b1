"""MetricBuffer against a real sqlite store: batches, outages, spill files, tags and status, upload-spill."""

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.tracking.metric_buffer import MetricBuffer
from bridgetower_mlflow.tracking.spill import upload_spill


class Outage:
    """A real client whose log_batch fails while `down` is set (the server being away)."""

    def __init__(self, client):
        self.client, self.down, self.calls = client, True, 0

    def log_batch(self, *args, **kwargs):
        self.calls += 1
        if self.down:
            raise ConnectionError("connection refused")
        return self.client.log_batch(*args, **kwargs)

    def set_terminated(self, *args, **kwargs):
        if self.down:
            raise ConnectionError("connection refused")
        return self.client.set_terminated(*args, **kwargs)


def _history(client, run_id, key):
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_all_metrics_arrive_in_batches(sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    buffer = MetricBuffer(client, run_id, tmp_path / "spill.jsonl", flush_interval=0.05)
    for step in range(2500):
        buffer.log_metric("loss", step / 10, step)
    assert buffer.close(timeout=60) == 0
    assert _history(client, run_id, "loss") == [(s, s / 10) for s in range(2500)]
    assert not (tmp_path / "spill.jsonl").exists()


def test_outage_spills_bounded_memory_then_replays_in_order_without_duplicates(sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    flaky = Outage(client)
    buffer = MetricBuffer(flaky, run_id, tmp_path / "spill.jsonl", flush_interval=0.05, max_in_memory=100)
    for step in range(1000):
        buffer.log_metric("loss", float(step), step)
    assert len(buffer._queue) <= 100 and (tmp_path / "spill.jsonl").exists()
    flaky.down = False
    assert buffer.flush(timeout=60)
    buffer.close(timeout=5)
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(1000)]


def test_server_never_back_leaves_an_uploadable_spill(sqlite_uri, tmp_path, monkeypatch):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    buffer = MetricBuffer(Outage(client), run_id, tmp_path / "spill.jsonl", flush_interval=0.05, max_in_memory=50)
    for step in range(300):
        buffer.log_metric("loss", float(step), step)
    assert buffer.close(timeout=0.5) == 300
    sent, runs = upload_spill(tmp_path / "spill.jsonl")
    assert sent == 300 and runs == {run_id}
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(300)]
    assert not (tmp_path / "spill.jsonl").exists()


def test_next_run_replays_spills_earlier_runs_left_but_not_a_live_one(sqlite_uri, tmp_path):
    from bridgetower_mlflow.tracking.spill import hold_spill_lock, upload_leftovers

    client = MlflowClient(sqlite_uri)
    experiment = client.create_experiment("e")
    dead, live = (client.create_run(experiment).info.run_id for _ in range(2))
    for run_id in (dead, live):
        buffer = MetricBuffer(Outage(client), run_id, tmp_path / f"{run_id}.spill.jsonl", flush_interval=0.05)
        for step in range(20):
            buffer.log_metric("loss", float(step), step)
        assert buffer.close(timeout=0.2) == 20
    lock = hold_spill_lock(tmp_path / f"{live}.spill.jsonl")  # that run is still going
    assert upload_leftovers(tmp_path) == 20
    lock.close()
    assert _history(client, dead, "loss") == [(s, float(s)) for s in range(20)]
    assert _history(client, live, "loss") == [] and (tmp_path / f"{live}.spill.jsonl").exists()


def test_end_of_run_tags_and_status_wait_out_the_outage_in_order(sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    flaky = Outage(client)
    buffer = MetricBuffer(flaky, run_id, tmp_path / "spill.jsonl", flush_interval=0.05)
    for step in range(10):
        buffer.log_metric("loss", float(step), step)
    buffer.log_tags({"input_bound": "no", "mlflow.note.content": "the description"})
    buffer.log_status("FINISHED")
    assert buffer.close(timeout=0.5) == 12  # ten metrics, the tags, the status: all in the spill file
    assert client.get_run(run_id).info.status == "RUNNING"
    sent, runs = upload_spill(tmp_path / "spill.jsonl")  # the server never came back to that process
    run = client.get_run(run_id)
    assert (sent, runs, run.info.status) == (10, {run_id}, "FINISHED")
    assert run.data.tags["input_bound"] == "no" and run.data.tags["mlflow.note.content"] == "the description"
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(10)]


def test_persist_puts_everything_queued_on_disk_and_a_new_buffer_sends_it(sqlite_uri, tmp_path):
    """What a checkpoint does: a process killed after it loses nothing it had logged."""
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    spill = tmp_path / "spill.jsonl"
    killed = MetricBuffer(Outage(client), run_id, spill, flush_interval=60)
    for step in range(25):
        killed.log_metric("loss", float(step), step)
    killed.persist()
    assert len(spill.read_text().splitlines()) == 25  # on disk now; the process may die
    killed.close(timeout=0)  # stands in for the kill: its sender stops, the file stays as persist left it
    assert len(spill.read_text().splitlines()) == 25
    resumed = MetricBuffer(client, run_id, spill, flush_interval=0.05)  # same run, same spill file
    resumed.log_metric("loss", 25.0, 25)
    assert resumed.close(timeout=30) == 0
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(26)]


class SlowSend:
    """A real client whose first log_batch hangs until released (a send stuck in MLflow's retries)."""

    def __init__(self, client):
        import threading

        self.client, self.entered, self.release = client, threading.Event(), threading.Event()

    def log_batch(self, *args, **kwargs):
        if not self.release.is_set():
            self.entered.set()
            self.release.wait(30)
        return self.client.log_batch(*args, **kwargs)


def test_a_checkpoint_during_a_hung_send_loses_nothing(sqlite_uri, tmp_path):
    # persist() moves every queued record to disk, the in-flight batch included; when that send finally
    # succeeds, its acknowledgement must not drop the newer records now at the head of the queue
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    slow = SlowSend(client)
    buffer = MetricBuffer(slow, run_id, tmp_path / "spill.jsonl", flush_interval=0.05, batch_size=10)
    for step in range(10):
        buffer.log_metric("loss", float(step), step)
    assert slow.entered.wait(10)
    buffer.persist()  # a checkpoint save while the first batch is in flight
    for step in range(10, 30):
        buffer.log_metric("loss", float(step), step)
    slow.release.set()
    assert buffer.close(timeout=60) == 0
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(30)]



@pytest.mark.parametrize("spilled_again", [False, True], ids=["then-sent", "then-spilled-again"])
def test_a_spill_file_removed_mid_run_does_not_stop_the_sender(sqlite_uri, tmp_path, caplog, spilled_again):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    spill = tmp_path / "spill.jsonl"
    buffer = MetricBuffer(client, run_id, spill, flush_interval=60)  # the sender waits until close flushes
    for step in range(5):
        buffer.log_metric("loss", float(step), step)
    buffer.persist()
    spill.unlink()  # someone cleans the cache folder while the run goes on
    for step in range(5, 10):
        buffer.log_metric("loss", float(step), step)
    if spilled_again:
        buffer.persist()  # the next checkpoint starts a new file before the sender has looked
    assert buffer.close(timeout=30) == 0  # what was logged after still arrives
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(5, 10)]
    assert f"{spill} was removed while the run was going: 5 records it held are lost" in caplog.text
