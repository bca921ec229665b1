"""A spill file a kill or a full disk cut short (issue 22): the writer leaves only whole lines, the reader
keeps every whole record, names the bad line in one warning and moves the damaged file aside.

Against real processes: `upload-spill`, the next `train` on the machine, a real `mlflow server` that stops
answering (SIGSTOP), a real SIGKILL, a real file-size limit (the kernel's EFBIG, what a full disk's ENOSPC
does to a write: it ends short, then fails)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.tracking.records import MetricRecord, from_line, to_line

from tests.conftest import BIN, MlflowServer, run_cli

SHORT_TRAIN = ["--logging-steps", "1", "--per-device-train-batch-size", "8", "--dataloader-num-workers", "0",
               "--log-model", "false"]
NEXT_TRAIN = ["train", "--max-steps", "2", "--throughput-warmup-steps", "1", *SHORT_TRAIN]  # a short next run


def _lines(run_id, steps):
    return "".join(to_line(run_id, MetricRecord("loss", float(s), 1_000 + s, s)) for s in steps).encode()


# name -> (spill bytes of run_id, the steps of its whole records, the first bad line)
DAMAGE = {
    "torn": lambda run: (_lines(run, range(8)) + _lines(run, [8])[:41], list(range(8)), 9),
    # a power loss leaves NULs where the unsynced tail was; other garbage is not even UTF-8
    "garbage-appended": lambda run: (_lines(run, range(8)) + b"\x00" * 300 + b"\n\xff\xfe\x9c garbage",
                                     list(range(8)), 9),
    # what the old writer did after a kill: its next append glued a whole line onto the torn one
    "torn-then-appended": lambda run: (_lines(run, range(4)) + _lines(run, [4])[:41] + _lines(run, range(5, 8)),
                                       [0, 1, 2, 3, 6, 7], 5),
}


def _steps(client, run_id, key="loss"):
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def _damage_warnings(text, spill):
    return [line for line in text.splitlines() if "not a whole spill record" in line and str(spill) in line]


def _names(warning, bad, aside):
    """The warning names the first bad line and where the file now is."""
    return re.search(rf"\blines? {bad}\b", warning) is not None and str(aside) in warning


@pytest.mark.parametrize("damage", DAMAGE)
def test_upload_spill_uploads_every_whole_record_of_a_damaged_file_and_moves_it_aside(sqlite_uri, tmp_path,
                                                                                      damage):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    data, whole, bad = DAMAGE[damage](run_id)
    spill = tmp_path / f"{run_id}.spill.jsonl"
    spill.write_bytes(data)
    result = run_cli(["upload-spill", str(spill)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"uploaded {len(whole)} metrics to 1 run(s): {run_id}" in result.stdout
    aside = tmp_path / f"{run_id}.spill.jsonl.damaged"
    warnings = _damage_warnings(result.stderr, spill)
    assert len(warnings) == 1 and _names(warnings[0], bad, aside), result.stderr
    assert "Traceback" not in result.stderr
    assert _steps(client, run_id) == whole
    assert not spill.exists() and aside.read_bytes() == data  # kept as it was, for whoever looks into it
    assert not list(tmp_path.glob("*.spill.jsonl"))  # the next run on the machine does not replay it again


def test_upload_spill_leaves_a_file_its_run_is_still_writing(sqlite_uri, tmp_path):
    from bridgetower_mlflow.tracking.spill import hold_spill_lock

    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    spill = tmp_path / f"{run_id}.spill.jsonl"
    data = _lines(run_id, range(5)) + _lines(run_id, [5])[:30]  # a cut last line: while its run lives, a write going on
    spill.write_bytes(data)
    lock = hold_spill_lock(spill)  # the run is still going on this machine
    try:
        result = run_cli(["upload-spill", str(spill)])
    finally:
        lock.close()
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: spill_file: {spill} is still being written by its run on this machine; "
        "allowed: the spill file of a run that has ended"]
    assert spill.read_bytes() == data and _steps(client, run_id) == []  # untouched, nothing sent twice later


def test_a_run_resuming_on_its_damaged_spill_keeps_its_whole_records(sqlite_uri, tmp_path, caplog):
    """A killed process's file the next run could not replay (its server was away then): the run's buffer adopts it."""
    from bridgetower_mlflow.tracking.metric_buffer import MetricBuffer

    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    spill = tmp_path / f"{run_id}.spill.jsonl"
    data, whole, bad = DAMAGE["torn"](run_id)
    spill.write_bytes(data)
    buffer = MetricBuffer(client, run_id, spill, flush_interval=0.05)
    buffer.log_metric("loss", 20.0, 20)
    assert buffer.close(timeout=60) == 0
    assert _steps(client, run_id) == [*whole, 20]
    aside = tmp_path / f"{run_id}.spill.jsonl.damaged"
    warnings = _damage_warnings(caplog.text, spill)
    assert len(warnings) == 1 and _names(warnings[0], bad, aside), caplog.text
    assert aside.read_bytes() == data and not spill.exists()


def test_an_append_after_a_cut_line_starts_a_line_of_its_own(tmp_path):
    from bridgetower_mlflow.tracking.spill import append_whole, read_spill

    run_id = "a" * 32
    spill = tmp_path / f"{run_id}.spill.jsonl"
    spill.write_bytes(_lines(run_id, range(3)) + _lines(run_id, [3])[:41])  # a dead writer's cut line
    append_whole(spill, _lines(run_id, [4, 5]).decode())
    records, bad = read_spill(spill)
    assert [record.step for _, record in records] == [0, 1, 2, 4, 5] and bad == [4]  # nothing glued onto it


FULL_DISK = """
import json, os, resource, signal, sys
from pathlib import Path
from mlflow.tracking import MlflowClient
from bridgetower_mlflow.tracking.metric_buffer import MetricBuffer

spill, run_id = Path(sys.argv[1]), sys.argv[2]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG, as one on a full disk
buffer = MetricBuffer(MlflowClient(), run_id, spill, flush_interval=3600)  # its sender sleeps: all is for the spill
for step in range(100):
    buffer.log_metric("loss", float(step), step)
buffer.persist()
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (spill.stat().st_size + 20_000, hard))  # the disk fills up mid-spill
for step in range(100, 1000):
    buffer.log_metric("loss", float(step), step)
buffer.persist()  # a checkpoint's: 900 records, 100 kB, do not fit
full = spill.read_bytes()
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space again
buffer.persist()  # the next checkpoint's
print(json.dumps({"full": full.decode(errors="replace"), "after": spill.read_text()}))
os._exit(0)  # as a killed process ends: nothing more is sent or written
"""


def test_a_full_disk_mid_spill_leaves_only_whole_lines_and_loses_nothing(sqlite_uri, tmp_path):
    from bridgetower_mlflow.tracking.spill import upload_spill

    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    spill = tmp_path / f"{run_id}.spill.jsonl"
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(spill), run_id], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = json.loads(proc.stdout.strip().splitlines()[-1])
    assert files["full"].endswith("\n") and [from_line(line)[1].step for line in files["full"].splitlines()] == list(
        range(100)), "the refused spill left part of itself in the file"
    assert "No space" in proc.stderr or "too large" in proc.stderr  # one warning says why the records wait in memory
    assert [from_line(line)[1].step for line in files["after"].splitlines()] == list(range(1000))  # kept, then written
    sent, runs = upload_spill(spill)
    assert (sent, runs) == (1000, {run_id}) and _steps(client, run_id) == list(range(1000))


def _train_process(args, log_path, env_extra=None):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **(env_extra or {})}
    return subprocess.Popen([str(BIN / "bridgetower-mlflow"), "train", *args], env=env, text=True,
                            stdout=subprocess.DEVNULL, stderr=open(log_path, "w"), start_new_session=True)


def _wait_for(predicate, timeout=300, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(predicate)


@pytest.mark.slow
def test_the_next_train_replays_the_whole_records_of_damaged_leftovers(cache_dir, sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    dead = client.create_experiment("dead")
    spills, files = cache_dir / "spill", {}
    spills.mkdir(parents=True, exist_ok=True)
    for damage in ("torn", "garbage-appended"):  # two runs killed on this machine, each leaving one kind
        run_id = client.create_run(dead).info.run_id
        files[damage] = (run_id, *DAMAGE[damage](run_id))
        (spills / f"{run_id}.spill.jsonl").write_bytes(files[damage][1])
    try:
        result = run_cli([*NEXT_TRAIN, "--output-dir", str(tmp_path / "out")], timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        new = client.search_runs(["0"])
        assert len(new) == 1 and new[0].info.status == "FINISHED" and _steps(client, new[0].info.run_id) == [1, 2]
        for damage, (run_id, data, whole, bad) in files.items():
            spill, aside = spills / f"{run_id}.spill.jsonl", spills / f"{run_id}.spill.jsonl.damaged"
            assert _steps(client, run_id) == whole, damage
            warnings = _damage_warnings(result.stderr, spill)
            assert len(warnings) == 1 and _names(warnings[0], bad, aside), result.stderr
            assert not spill.exists() and aside.read_bytes() == data, damage
        assert "Traceback" not in result.stderr
    finally:
        for run_id, *_ in files.values():
            for leftover in spills.glob(f"{run_id}.*"):
                leftover.unlink()


def _writes_in(folder):
    """Yields as soon as a file in `folder` is written to (Linux inotify): at the write, not a poll later."""
    import ctypes
    import select

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0 or libc.inotify_add_watch(fd, str(folder).encode(), 0x2) < 0:  # IN_MODIFY
        raise OSError(ctypes.get_errno(), "inotify")
    try:
        while True:
            if select.select([fd], [], [], 1.0)[0]:
                os.read(fd, 1 << 16)
            yield
    finally:
        os.close(fd)


def _kill_while_it_spills(proc, spill, enough=300_000, timeout=300):
    """SIGKILL `proc` the moment its spill file, holding a whole line already, is seen ending inside a line (a
    write going on), else at the write that takes it past `enough` bytes. Returns whether it was caught mid-write."""
    deadline, handle, holds_a_line = time.monotonic() + timeout, None, False
    spill.parent.mkdir(parents=True, exist_ok=True)
    try:
        for _ in _writes_in(spill.parent):
            if time.monotonic() > deadline or proc.poll() is not None:
                break
            try:
                handle = handle or open(spill, "rb")  # the writer appends to this file, never replaces it
            except FileNotFoundError:
                continue
            size = os.fstat(handle.fileno()).st_size
            tail = os.pread(handle.fileno(), 1, size - 1) if size else b"\n"
            holds_a_line = holds_a_line or b"\n" in os.pread(handle.fileno(), 4096, 0)
            if (tail != b"\n" and holds_a_line) or size >= enough:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return tail != b"\n"
    finally:
        if handle:
            handle.close()
    raise AssertionError(f"the run ended, or its spill file never reached {enough} bytes: {proc.poll()}")


@pytest.mark.slow
def test_a_train_killed_while_it_spills_leaves_only_whole_records_and_upload_spill_sends_them(
        cache_dir, tmp_path, monkeypatch):
    server = MlflowServer(f"sqlite:///{tmp_path / 'kill.db'}", tmp_path / "artifacts").start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    client, out, run_id = MlflowClient(server.url), tmp_path / "out", "none yet"
    try:
        # every step's metrics and system samples as fast as they come: each checkpoint's persist() writes
        # some 100 kB, and the kill lands at one of those writes
        proc = _train_process(["--max-steps", "2000", *SHORT_TRAIN, "--save-steps", "40", "--output-dir", str(out)],
                              tmp_path / "killed.log", {"MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "0.05"})
        try:
            run_id = _wait_for(lambda: [r.info.run_id for r in client.search_runs(["0"])])[0]
            _wait_for(lambda: len(_steps(client, run_id)) >= 2)
            os.killpg(server.process.pid, signal.SIGSTOP)  # the server stops answering: what follows is spilled
            spill = cache_dir / "spill" / f"{run_id}.spill.jsonl"
            caught = _kill_while_it_spills(proc, spill)
        finally:
            os.killpg(server.process.pid, signal.SIGCONT)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        *lines, tail = spill.read_bytes().split(b"\n")
        records = [from_line(line.decode())[1] for line in lines]  # every line before the last is whole
        if tail:
            print(f"the kill cut the last line ({len(tail)} bytes); caught mid-write: {caught}")
        spilled: dict[str, set[int]] = {}
        for record in records:
            if isinstance(record, MetricRecord):
                spilled.setdefault(record.key, set()).add(record.step)
        assert spilled, f"no whole metric record before the kill: {len(records)} records, a {len(tail)}-byte tail"
        upload = run_cli(["upload-spill", str(spill)])
        assert upload.returncode == 0, upload.stderr[-3000:]
        for key, steps in spilled.items():  # every whole record the kill left arrived
            assert steps <= set(_steps(client, run_id, key)), key
        assert not spill.exists()
        warnings = _damage_warnings(upload.stderr, spill)
        assert len(warnings) == (1 if tail else 0), upload.stderr  # a cut last line is named, once
        print(f"killed while spilling (caught mid-write: {caught}); {len(records)} whole records uploaded")
    finally:
        for leftover in (cache_dir / "spill").glob("*.damaged"):
            if run_id in leftover.name:
                leftover.unlink()
        server.stop()
