"""MetricBuffer against real stores: batches, a real `mlflow server` that stops answering (SIGSTOP: its
connections open, its requests wait), spill files of processes that end or are SIGKILLed, tags and status,
upload-spill."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.tracking.metric_buffer import MetricBuffer
from bridgetower_mlflow.tracking.spill import upload_spill

from tests.conftest import MlflowServer


class Server:
    """The module's real tracking server; `stopped()` is an outage: it stops answering, then answers again."""

    def __init__(self, server):
        self.server, self.url = server, server.url

    @contextlib.contextmanager
    def stopped(self):
        os.killpg(self.server.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.killpg(self.server.process.pid, signal.SIGCONT)

    def new_run(self):
        client = MlflowClient(self.url)
        return client, client.create_run(client.create_experiment(uuid.uuid4().hex)).info.run_id


@pytest.fixture(scope="module")
def _module_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("buffer-server")
    server = MlflowServer(f"sqlite:///{folder / 'server.db'}", folder / "artifacts").start()
    yield server
    server.stop()


@pytest.fixture
def server(_module_server, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", _module_server.url)  # what upload-spill and the next run talk to
    return Server(_module_server)


# A run's process: buffers log, then either end (close, as a run ends whose server is away) or persist and
# wait for the test's SIGKILL
WRITER = """
import json, sys, time
from pathlib import Path
from mlflow.tracking import MlflowClient
from bridgetower_mlflow.tracking.metric_buffer import MetricBuffer

plan = json.loads(sys.argv[1])
buffers = []
for run in plan["runs"]:
    buffer = MetricBuffer(MlflowClient(plan["url"]), run["run_id"], Path(run["spill"]), flush_interval=0.05,
                          max_in_memory=run.get("max_in_memory", 50_000))
    for step in range(run["metrics"]):
        buffer.log_metric("loss", float(step), step)
    if "tags" in run:
        buffer.log_tags(run["tags"])
    if "status" in run:
        buffer.log_status(run["status"])
    buffers.append(buffer)
if plan["end"] == "kill":
    for buffer in buffers:
        buffer.persist()
    print("persisted", flush=True)
    time.sleep(600)
print(json.dumps([buffer.close(timeout=0.5) for buffer in buffers]))
"""


def _writer(url, runs, end="close"):
    plan = json.dumps({"url": url, "runs": runs, "end": end})
    return subprocess.Popen([sys.executable, "-c", WRITER, plan], stdout=subprocess.PIPE, text=True)


def _run_and_end(url, runs):
    """Records each run left in its spill file, from a process that ended while its server did not answer."""
    writer = _writer(url, runs)
    out, _ = writer.communicate(timeout=300)
    assert writer.returncode == 0
    return json.loads(out.strip().splitlines()[-1])


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


def test_outage_spills_bounded_memory_then_replays_in_order_without_duplicates(server, tmp_path):
    client, run_id = server.new_run()
    with server.stopped():  # the first send waits for an answer while the run logs on
        buffer = MetricBuffer(client, run_id, tmp_path / "spill.jsonl", flush_interval=0.05, max_in_memory=100)
        for step in range(1000):
            buffer.log_metric("loss", float(step), step)
        in_memory = buffer.pending() - len((tmp_path / "spill.jsonl").read_text().splitlines())
        assert in_memory <= 100, f"{in_memory} records in memory, allowed 100"
    assert buffer.flush(timeout=60)
    buffer.close(timeout=5)
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(1000)]


def test_server_never_back_leaves_an_uploadable_spill(server, tmp_path):
    client, run_id = server.new_run()
    with server.stopped():  # it answers again only after the run's process has ended
        left = _run_and_end(server.url, [{"run_id": run_id, "spill": str(tmp_path / "spill.jsonl"), "metrics": 300,
                                          "max_in_memory": 50}])
    assert left == [300]
    sent, runs = upload_spill(tmp_path / "spill.jsonl")
    assert sent == 300 and runs == {run_id}
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(300)]
    assert not (tmp_path / "spill.jsonl").exists()


def test_next_run_replays_spills_earlier_runs_left_but_not_a_live_one(server, tmp_path):
    from bridgetower_mlflow.tracking.spill import hold_spill_lock, upload_leftovers

    (client, dead), (_, live) = server.new_run(), server.new_run()
    with server.stopped():
        left = _run_and_end(server.url, [{"run_id": run_id, "spill": str(tmp_path / f"{run_id}.spill.jsonl"),
                                          "metrics": 20} for run_id in (dead, live)])
    assert left == [20, 20]
    lock = hold_spill_lock(tmp_path / f"{live}.spill.jsonl")  # that run is still going
    assert upload_leftovers(tmp_path) == 20
    lock.close()
    assert _history(client, dead, "loss") == [(s, float(s)) for s in range(20)]
    assert _history(client, live, "loss") == [] and (tmp_path / f"{live}.spill.jsonl").exists()


def test_end_of_run_tags_and_status_wait_out_the_outage_in_order(server, tmp_path):
    client, run_id = server.new_run()
    with server.stopped():
        left = _run_and_end(server.url, [{"run_id": run_id, "spill": str(tmp_path / "spill.jsonl"), "metrics": 10,
                                          "tags": {"input_bound": "no", "mlflow.note.content": "the description"},
                                          "status": "FINISHED"}])
    assert left == [12]  # ten metrics, the tags, the status: all in the spill file
    assert client.get_run(run_id).info.status == "RUNNING"
    sent, runs = upload_spill(tmp_path / "spill.jsonl")  # the server never came back to that process
    run = client.get_run(run_id)
    assert (sent, runs, run.info.status) == (10, {run_id}, "FINISHED")
    assert run.data.tags["input_bound"] == "no" and run.data.tags["mlflow.note.content"] == "the description"
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(10)]


def test_persist_puts_everything_queued_on_disk_and_a_new_buffer_sends_it(server, tmp_path):
    """What a checkpoint does: a process SIGKILLed after it loses nothing it had logged."""
    client, run_id = server.new_run()
    spill = tmp_path / "spill.jsonl"
    with server.stopped():
        killed = _writer(server.url, [{"run_id": run_id, "spill": str(spill), "metrics": 25}], end="kill")
        try:
            assert killed.stdout.readline().strip() == "persisted"
            assert len(spill.read_text().splitlines()) == 25  # on disk now; the process may die
        finally:
            killed.kill()
            killed.wait()
    assert killed.returncode == -signal.SIGKILL and len(spill.read_text().splitlines()) == 25
    resumed = MetricBuffer(client, run_id, spill, flush_interval=0.05)  # same run, same spill file
    resumed.log_metric("loss", 25.0, 25)
    assert resumed.close(timeout=30) == 0
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(26)]


class _SaysWhenItSends(MlflowClient):
    """A real client that says when a log_batch has started (the sender then waits for the server's answer)."""

    def __init__(self, uri):
        super().__init__(uri)
        self.sending = threading.Event()

    def log_batch(self, *args, **kwargs):
        self.sending.set()
        return super().log_batch(*args, **kwargs)


def test_a_checkpoint_during_a_hung_send_loses_nothing(server, tmp_path):
    # persist() moves every queued record to disk, the in-flight batch included; when that send finally
    # succeeds, its acknowledgement must not drop the newer records now at the head of the queue
    run_id = server.new_run()[1]
    client = _SaysWhenItSends(server.url)
    with server.stopped():  # the first send waits for an answer
        buffer = MetricBuffer(client, run_id, tmp_path / "spill.jsonl", flush_interval=0.05, batch_size=10)
        for step in range(10):
            buffer.log_metric("loss", float(step), step)
        assert client.sending.wait(timeout=30), "the sender did not start its first send within 30 s"
        assert not buffer.wait_until_idle(timeout=0.2)  # a send is in flight: the sender is not idle
        buffer.persist()  # a checkpoint save while the first batch is in flight
        for step in range(10, 30):
            buffer.log_metric("loss", float(step), step)
    assert buffer.close(timeout=60) == 0
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(30)]


class _RecordsEachSend(MlflowClient):
    """A real client that keeps the steps of each log_batch it sends."""

    def __init__(self, uri):
        super().__init__(uri)
        self.sends: list[list[int]] = []

    def log_batch(self, run_id, metrics=(), *args, **kwargs):
        result = super().log_batch(run_id, metrics, *args, **kwargs)
        self.sends.append([metric.step for metric in metrics])
        return result


def test_the_shipment_after_a_checkpoint_carries_what_was_logged_since(sqlite_uri, tmp_path):
    """A checkpoint persists the queue to the spill file; the next shipment sends it and what the run logged after
    it, so a run that checkpoints more often than it ships still shows its live steps an interval later (the
    spilled part used to go alone, and what came after waited for the next checkpoint to spill it too)."""
    client = _RecordsEachSend(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    buffer = _sender_asleep(MetricBuffer(client, run_id, tmp_path / "spill.jsonl", flush_interval=2.0))
    for step in (1, 2, 3):
        buffer.log_metric("loss", float(step), step)
    buffer.persist()  # a checkpoint at step 3
    buffer.log_metric("loss", 4.0, 4)
    deadline = time.monotonic() + 60
    while not client.sends and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.sends[:1] == [[1, 2, 3, 4]], f"the sends so far: {client.sends}"
    assert buffer.close(timeout=30) == 0
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in (1, 2, 3, 4)]


def _sender_asleep(buffer):
    """Wait until the sender has looked, found nothing and sleeps for its interval: a sender the scheduler
    starts late (CI under load) would otherwise read what the test spills before the test removes it."""
    assert buffer.wait_until_idle(timeout=30), "the sender did not go to sleep within 30 s"
    return buffer


@pytest.mark.parametrize("spilled_again", [False, True], ids=["then-sent", "then-spilled-again"])
def test_a_spill_file_removed_mid_run_does_not_stop_the_sender(sqlite_uri, tmp_path, caplog, spilled_again):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    spill = tmp_path / "spill.jsonl"
    buffer = _sender_asleep(MetricBuffer(client, run_id, spill, flush_interval=60))  # it waits until close flushes
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


def test_a_spill_file_removed_while_the_sender_opens_it_does_not_stop_the_sender(sqlite_uri, tmp_path, caplog,
                                                                                monkeypatch):
    """The removal lands between the sender's look at the file and its open (CI under load once hit it)."""
    import builtins

    from bridgetower_mlflow.tracking import spill_cursor

    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    spill = tmp_path / "spill.jsonl"
    buffer = _sender_asleep(MetricBuffer(client, run_id, spill, flush_interval=60))
    for step in range(5):
        buffer.log_metric("loss", float(step), step)
    buffer.persist()

    def open_after_a_cleanup(path, *args, **kwargs):
        if str(path) == str(spill):
            spill.unlink(missing_ok=True)  # someone cleans the cache folder at exactly this instant
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(spill_cursor, "open", open_after_a_cleanup, raising=False)
    for step in range(5, 10):
        buffer.log_metric("loss", float(step), step)
    assert buffer.close(timeout=30) == 0  # the sender lived on and sent what was logged after
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(5, 10)]
    assert f"{spill} was removed while the run was going: 5 records it held are lost" in caplog.text


# A sender that cannot die (issue 31): before, an error the sender met outside its send ended the thread for
# the rest of the run, silently; flush() then waited out its whole timeout and nothing logged after arrived.

@pytest.mark.parametrize("garbage", [b"\xff\xfe\x00 not text\n", b'{"half": "a record"\n'], ids=["bytes", "json"])
def test_a_line_in_the_spill_that_is_not_a_record_is_skipped_and_the_sender_goes_on(server, tmp_path, caplog, garbage):
    client, run_id = server.new_run()
    spill = tmp_path / "spill.jsonl"
    buffer = _sender_asleep(MetricBuffer(client, run_id, spill, flush_interval=60))  # it waits until close flushes
    for step in range(5):
        buffer.log_metric("loss", float(step), step)
    buffer.persist()
    with open(spill, "ab") as handle:  # garbage written into the file while the run goes on
        handle.write(garbage)
    for step in range(5, 10):
        buffer.log_metric("loss", float(step), step)
    buffer.persist()  # the next checkpoint appends after the garbage
    for step in range(10, 15):
        buffer.log_metric("loss", float(step), step)
    assert buffer.close(timeout=60) == 0
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(15)]
    assert caplog.text.count("is not a whole spill record") == 1 and not spill.exists()


class _DropsTheFirstBatch(MlflowClient):
    """A real client whose first log_batch meets an error without a message (a reset connection, say)."""

    def __init__(self, uri, error):
        super().__init__(uri)
        self.errors = [error]

    def log_batch(self, *args, **kwargs):
        if self.errors:
            raise self.errors.pop()
        return super().log_batch(*args, **kwargs)


@pytest.mark.parametrize("error", [ConnectionResetError(), RuntimeError("\n"), Exception("")],
                         ids=["no-args", "newline", "empty"])
def test_an_error_with_no_message_does_not_stop_the_sender(server, tmp_path, caplog, error):
    """Before: `str(exc).splitlines()[0]` raised IndexError inside the sender's except clause."""
    client, run_id = server.new_run()
    buffer = MetricBuffer(_DropsTheFirstBatch(server.url, error), run_id, tmp_path / "spill.jsonl",
                          flush_interval=0.05)
    for step in range(20):
        buffer.log_metric("loss", float(step), step)
    assert buffer.close(timeout=60) == 0
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(20)]
    assert f"tracking server unavailable ({type(error).__name__}); buffering" in caplog.text


@pytest.fixture
def failing_disk(monkeypatch):
    """The spill file's reads fail as on a failing disk (EIO), while `failing` is set; writes still work."""
    import builtins
    import errno

    from bridgetower_mlflow.tracking import spill_cursor

    state = {"failing": True, "reads": 0}

    def open_on_a_failing_disk(path, mode="r", *args, **kwargs):
        if state["failing"] and "r" in mode:
            state["reads"] += 1
            raise OSError(errno.EIO, "Input/output error", str(path))
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(spill_cursor, "open", open_on_a_failing_disk, raising=False)
    return state


def test_a_spill_that_cannot_be_read_keeps_its_records_and_the_rest_still_goes(server, tmp_path, caplog, failing_disk):
    client, run_id = server.new_run()
    spill = tmp_path / "spill.jsonl"
    buffer = MetricBuffer(client, run_id, spill, flush_interval=0.05)
    for step in range(5):
        buffer.log_metric("loss", float(step), step)
    buffer.persist()  # on disk, where the sender cannot read them
    for step in range(5, 10):
        buffer.log_metric("loss", float(step), step)
    started = time.monotonic()
    left = buffer.close(timeout=120)
    assert time.monotonic() - started < 60, "close waited out its timeout for records it could not read"
    assert left == 5 and failing_disk["reads"] >= 1  # said at the end: what waits on disk
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(5, 10)]  # the rest went meanwhile
    assert caplog.text.count("Input/output error") == 1 and f"cannot read {spill}; its 5 records wait" in caplog.text
    failing_disk["failing"] = False  # the disk is back: upload-spill sends them
    assert upload_spill(spill) == (5, {run_id})
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(10)]


def test_a_spill_readable_again_is_sent_by_the_same_run(server, tmp_path, caplog, failing_disk, monkeypatch):
    from bridgetower_mlflow.tracking import spill_cursor

    monkeypatch.setattr(spill_cursor, "SPILL_RETRY_S", 0.2)
    client, run_id = server.new_run()
    buffer = MetricBuffer(client, run_id, tmp_path / "spill.jsonl", flush_interval=0.05)
    for step in range(5):
        buffer.log_metric("loss", float(step), step)
    buffer.persist()
    deadline = time.monotonic() + 60
    while failing_disk["reads"] < 2 and time.monotonic() < deadline:  # it has tried, and tried again
        time.sleep(0.05)
    assert failing_disk["reads"] >= 2, failing_disk
    failing_disk["failing"] = False
    assert buffer.close(timeout=60) == 0
    assert _history(client, run_id, "loss") == [(s, float(s)) for s in range(5)]
    assert caplog.text.count("Input/output error") == 1  # warned once, whatever the number of tries

