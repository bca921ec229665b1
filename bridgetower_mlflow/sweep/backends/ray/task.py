"""One sweep cell as a Ray task, on the node it landed on. Plain dicts in and out, so a node with another
version of the project still gets as far as saying so."""

from __future__ import annotations

import signal
import socket
import tempfile
from dataclasses import asdict
from importlib import metadata

from ....contract import HOST_NAME_TAG, RAY_NODE_ID_TAG
from ....environment import THREADS_ENV, for_child_process, torch_threads, train_command_override
from ...child import SweepContext, run_child
from ...grid import SweepCell

PROJECT = "bridgetower-mlflow"


def installed_version() -> str | None:
    """This machine's installed version of the project (None when it is not installed)."""
    try:
        return metadata.version(PROJECT)
    except metadata.PackageNotFoundError:
        return None


def with_checkpoint_upload(passthrough) -> list[str]:
    """A Ray cell's folder lives as long as its task: its checkpoints (save_steps > 0) go to the tracking server
    too, so a resume can continue the cell's run elsewhere. The user's own --checkpoint-upload wins."""
    words = list(passthrough)
    asked = any(word.split("=", 1)[0] in ("--checkpoint-upload", "--checkpoint_upload") for word in words)
    return words if asked else [*words, "--checkpoint-upload", "true"]


def cell_job(context: SweepContext, cell: SweepCell, version: str | None) -> dict:
    """What the driver sends a node for one cell (no client, no credentials: nodes use their own)."""
    return {
        "cell": asdict(cell), "version": version, "tracking_uri": context.tracking_uri,
        "experiment_id": context.experiment_id, "parent_run_id": context.parent_run_id,
        "passthrough": with_checkpoint_upload(context.passthrough), "train_cmd": train_command_override(),
        "omp_num_threads": torch_threads(),
    }


def _train_env(job: dict) -> dict:
    env = for_child_process()
    # Ray sets OMP_NUM_THREADS=1 in workers that reserve no CPU; train gets the driver's setting instead,
    # as a local sweep's train would.
    env.pop(THREADS_ENV, None)
    if job.get("omp_num_threads"):
        env[THREADS_ENV] = job["omp_num_threads"]
    return env


def _cancellable() -> None:
    """Ray's soft cancel raises KeyboardInterrupt through Python's SIGINT handler, and a node started with
    SIGINT ignored (nohup, a script's background job) hands its workers none: the cancel would do nothing."""
    try:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: leave it to Ray's forced cancel
        pass


def run_cell_task(job: dict) -> dict:
    """Check the project version, run the cell exactly as the local backend does, say where it ran."""
    import ray

    _cancellable()
    node_id, host = ray.get_runtime_context().get_node_id(), socket.gethostname()
    where = {"node_id": node_id, HOST_NAME_TAG: host}
    found = installed_version()
    if found != job["version"]:
        return {**where, "reason": f"{PROJECT} {found or 'is not installed'} on node {host} ({node_id[:12]}), "
                                   f"the driver has {job['version']}: install the same version on every node"}
    from mlflow import MlflowClient

    # A scratch working directory: a worker's own is Ray's business, and train's outputs/ is only scratch here
    # (what matters is logged to MLflow).
    with tempfile.TemporaryDirectory(prefix="bridgetower-cell-") as workdir:
        context = SweepContext(
            MlflowClient(job["tracking_uri"]), job["experiment_id"], job["parent_run_id"], job["passthrough"],
            job["tracking_uri"], child_tags={HOST_NAME_TAG: host, RAY_NODE_ID_TAG: node_id}, env=_train_env(job),
            train_cmd=job["train_cmd"], workdir=workdir,
        )
        result = run_child(context, SweepCell(**job["cell"]))
    return {**where, "run_id": result.run_id, "status": result.status, "returncode": result.returncode,
            "samples_per_second": result.samples_per_second, "reason": result.reason, "tail": list(result.tail)}
