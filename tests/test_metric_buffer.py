"""MetricBuffer against a real sqlite store: batches, outages, spill files and upload-spill."""

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
