"""What tracking costs the run it tracks: its threads yield the CPU to training, and the cheaper host
sampling still counts every worker and logs every series at every step (real threads, processes, sqlite)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest
from mlflow import MlflowClient

from bridgetower_mlflow.samplers.host_cpu import HostCpuSampler
from bridgetower_mlflow.samplers.mlflow_collectors import mlflow_collectors
from bridgetower_mlflow.telemetry.system.monitor import SystemMonitor
from bridgetower_mlflow.tracking.metric_buffer import MetricBuffer

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                                reason="per-thread nice values and names are Linux's")


def _stat_fields(tid: int) -> list[str]:
    with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as handle:
        text = handle.read()
    return text[text.rindex(")") + 2:].split()  # [0] is field 3, the state


def nice_of(tid: int) -> int:
    return int(_stat_fields(tid)[16])  # field 19


def comm_of(tid: int) -> str:
    with open(f"/proc/self/task/{tid}/comm", encoding="ascii") as handle:
        return handle.read().strip()


def thread_named(name: str) -> threading.Thread:
    (thread,) = [t for t in threading.enumerate() if t.name == name]
    return thread


@pytest.fixture
def run_buffer(sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("tracking-cost")).info.run_id
    buffer = MetricBuffer(client, run_id, tmp_path / "spill.jsonl", flush_interval=0.2)
    yield client, run_id, buffer
    buffer.close(timeout=30)


def wait_for_samples(monitor: SystemMonitor, count: int) -> None:
    deadline = time.monotonic() + 60
    while monitor.step < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert monitor.step >= count, "the monitor never sampled"


def test_the_monitor_thread_keeps_trainings_priority_and_says_its_name(run_buffer):
    """A monitor at a lower priority than training waits for the CPU every time it takes the GIL back: on a
    saturated host its samples came late (benchmarks/bench_monitor_priority.py), so it keeps training's."""
    _, _, buffer = run_buffer
    main = threading.get_native_id()
    before = nice_of(main)
    monitor = SystemMonitor(buffer, [HostCpuSampler()], interval=0.05).start()
    try:
        wait_for_samples(monitor, 1)
        tid = thread_named("system-monitor").native_id
        assert nice_of(tid) == before
        assert comm_of(tid) == "system-monitor"  # what top -H and the benchmark's /proc reading show
    finally:
        monitor.stop()


def test_the_sender_thread_keeps_trainings_priority_and_says_its_name(run_buffer):
    client, run_id, buffer = run_buffer
    before = nice_of(threading.get_native_id())
    buffer.log_metric("loss", 1.0, 1)
    assert buffer.flush(timeout=30)  # it has sent once: its loop is running
    assert [m.step for m in client.get_metric_history(run_id, "loss")] == [1]
    tid = thread_named("mlflow-run-sender").native_id
    assert nice_of(tid) == before
    assert comm_of(tid) == "mlflow-run-send"  # the kernel keeps 15 characters


def test_a_thread_names_itself_for_the_kernel_and_nothing_else_moves():
    from bridgetower_mlflow.telemetry.system.thread_names import name_this_thread

    seen = {}

    def body():
        name_this_thread()
        seen["nice"], seen["comm"] = nice_of(threading.get_native_id()), comm_of(threading.get_native_id())

    main_before = nice_of(threading.get_native_id())
    thread = threading.Thread(target=body, name="mlflow-run-sender")
    thread.start()
    thread.join()
    assert seen == {"nice": main_before, "comm": "mlflow-run-send"}
    assert nice_of(threading.get_native_id()) == main_before


def _burn(seconds: float, burned, release, child_seconds: float) -> None:
    """A data-loader worker: spends `seconds` of CPU (and its own child `child_seconds`), then waits."""
    if child_seconds:
        child = multiprocessing.get_context("fork").Process(target=_burn, args=(child_seconds, None, None, 0.0))
        child.start()
        child.join()
    started = time.thread_time()
    while time.thread_time() - started < seconds:
        pass
    if burned is not None:
        burned.set()
        release.wait(60)


def test_host_sampler_counts_live_and_finished_workers():
    """0.4 s of CPU in a worker (plus 0.2 s in its finished child): counted while it lives, kept once it ends."""
    context = multiprocessing.get_context("fork")  # how torch's DataLoader starts workers on Linux
    sampler = HostCpuSampler()
    sampler.start()
    start = sampler.cpu_seconds()
    burned, release = context.Event(), context.Event()
    worker = context.Process(target=_burn, args=(0.4, burned, release, 0.2))
    worker.start()
    try:
        assert burned.wait(60)
        live = sampler.sample()
        assert live["dataloader_workers_count"] == 1.0
        release.set()
        worker.join(60)
        ended = sampler.sample()
    finally:
        release.set()
        worker.join(60)
    assert ended["dataloader_workers_count"] == 0.0
    end, times = sampler.cpu_seconds(), os.times()
    assert 0.55 <= end.workers - start.workers <= 1.5, (start, end)  # 0.6 s burned, fork and exit; none lost
    assert abs(end.main - (times.user + times.system)) < 0.1, (end, times)


def test_every_series_is_logged_at_every_step(run_buffer):
    """What the telemetry tests read: MLflow's collectors and the project's own, one step per sample, no gap."""
    client, run_id, buffer = run_buffer
    monitor = SystemMonitor(buffer, [HostCpuSampler(), *mlflow_collectors(0)], interval=0.05).start()
    try:
        wait_for_samples(monitor, 5)
    finally:
        monitor.stop()
    assert buffer.flush(30)
    for key in ("cpu_utilization_percentage", "system_memory_usage_megabytes", "main_process_cpu_percentage",
                "dataloader_workers_cpu_percentage", "dataloader_workers_count", "process_cpu_percentage",
                "disk_usage_percentage", "network_receive_megabytes"):
        steps = [m.step for m in client.get_metric_history(run_id, f"system/{key}")]
        assert len(steps) >= 5 and steps == list(range(len(steps))), (key, steps)


def test_where_the_kernel_lists_no_children_psutil_counts_the_same():
    """The fallback (other systems, kernels without children lists) against the /proc reading, one live worker."""
    import psutil

    from bridgetower_mlflow.samplers.host_cpu import proc_tree_cpu, psutil_tree_cpu

    context = multiprocessing.get_context("fork")
    burned, release = context.Event(), context.Event()
    worker = context.Process(target=_burn, args=(0.2, burned, release, 0.0))
    worker.start()
    try:
        assert burned.wait(60)
        ours, theirs = proc_tree_cpu(os.getpid()), psutil_tree_cpu(psutil.Process())
    finally:
        release.set()
        worker.join(60)
    assert ours.live == theirs.live == 1
    assert abs(ours.main - theirs.main) < 0.1 and abs(ours.workers - theirs.workers) < 0.1, (ours, theirs)
