"""Rank 0's MLflow run: start or resume, params, tags, buffered metrics, artifacts, end status."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..contract import NOTE_TAG, PARAMS_FILE, RUN_NAME_TAG, SYSTEM_PREFIX
from ..environment import cache_folder, temporarily
from ..errors import ConfigError, DiskFull, TrackingError
from ..redact import first_line, redact_text
from . import params as params_mod
from .failures import tracking_error
from .metric_buffer import MetricBuffer
from .spill import hold_spill_lock, upload_leftovers

log = logging.getLogger(__name__)


def spill_dir() -> Path:
    return cache_folder() / "spill"


# the local end of a run whose status its buffer delivered (or spilled) already: one attempt, a short timeout, and
# MLflow's run and experiment links not printed again (ending the run on the server printed them)
LOCAL_END = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
             "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}


@contextlib.contextmanager
def no_retries() -> Iterator[None]:
    """LOCAL_END's settings for the duration: for the local end of a run whose status the buffer sent."""
    with temporarily(LOCAL_END):
        yield


class RunSession:
    """One MLflow run, used only by rank 0. Everything logged after the start goes through a MetricBuffer."""

    def __init__(self, run_id: str, client: Any, previous_status: str | None = None) -> None:
        self.run_id, self.client = run_id, client
        self.previous_status = previous_status  # status of a run resumed with resume=true, before we resumed it
        spill = spill_dir() / f"{run_id}.spill.jsonl"
        upload_leftovers(spill_dir())  # before our own lock: a killed process's spill of this run replays too
        self._spill_lock = hold_spill_lock(spill)
        self.buffer = MetricBuffer(client, run_id, spill)
        data = client.get_run(run_id).data
        self.existing_params, self.existing_tags = dict(data.params), dict(data.tags)
        # latest_metrics holds each key's highest step: a resumed run must not log those steps twice
        self.last_steps = {m.key: m.step for m in data._metric_objs}
        self.buffer.skip_logged({k: s for k, s in self.last_steps.items() if not k.startswith(SYSTEM_PREFIX)})

    @classmethod
    def start(cls, experiment_name: str, run_name: str, tags: dict[str, str],
              resume_run_id: str | None = None, project_run_id: str | None = None) -> RunSession:
        """Resume `resume_run_id`, else continue `project_run_id` (the run `mlflow run` or a sweep made:
        MLFLOW_RUN_ID), else start a new run."""
        import mlflow

        from .runs import default_experiment_id, mark_training_experiment
        from .store_init import ready_store

        probe_server(mlflow.get_tracking_uri())
        try:
            ready_store()
            run_id = resume_run_id or project_run_id
            experiment_id = default_experiment_id(experiment_name) if not run_id and experiment_name else None
            previous = mlflow.tracking.MlflowClient().get_run(resume_run_id).info.status if resume_run_id else None
            # MLflow's own monitor thread stops for good at its first failed get_run: the project's
            # monitor drives MLflow's collectors instead (samplers.mlflow_collectors)
            active = mlflow.start_run(run_id=run_id, run_name=None if run_id else run_name or None, tags=tags,
                                      experiment_id=experiment_id,
                                      log_system_metrics=False)
        except Exception as exc:  # noqa: BLE001 - server down, bad URI, permissions
            raise tracking_error("start the run", exc) from None
        if run_id and run_name:
            mlflow.set_tag(RUN_NAME_TAG, run_name)
        client = mlflow.tracking.MlflowClient()
        mark_training_experiment(client, active.info.experiment_id)
        return cls(active.info.run_id, client, previous)

    def log_params(self, params: dict[str, Any]) -> int:
        """Log every param (flattened, redacted, fitted to limits) plus params_full.json."""
        loggable, full = params_mod.prepare_params(params)
        clash = params_mod.conflicts(self.existing_params, loggable)
        if clash:
            key, (old, new) = next(iter(clash.items()))
            raise ConfigError(key, new, f"allowed: {old!r}, the value this run already logged (resumed runs keep "
                                        "their params; start a new run to change it)")
        try:
            sent = params_mod.log_params(self.client, self.run_id, loggable, self.existing_params)
        except Exception as exc:  # noqa: BLE001
            raise tracking_error("log params", exc) from None
        self.existing_params.update(loggable)
        self.log_dict(full, PARAMS_FILE)
        return sent

    def set_tags(self, tags: dict[str, Any]) -> None:
        """Queued with the metrics, in order: spilled and replayed like them when the server is away."""
        self.buffer.log_tags({k: redact_text(str(v)) for k, v in tags.items()})

    def delete_tag(self, key: str) -> None:
        """Now, not queued: for a tag an earlier attempt left (a resumed run's stale `error`)."""
        if key in self.existing_tags:
            self._or_warn(lambda: self.client.delete_tag(self.run_id, key), f"clear the {key} tag")

    def set_description(self, text: str) -> None:
        self.set_tags({NOTE_TAG: text})

    def log_dict(self, data: Any, artifact_file: str) -> None:
        self._or_warn(lambda: self.client.log_dict(self.run_id, data, artifact_file), f"log {artifact_file}")

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        self._or_warn(lambda: self.client.log_artifact(self.run_id, str(path), artifact_path), f"log {path}")

    def _or_warn(self, action: Callable[[], object], what: str) -> bool:
        """Tags and artifacts at phase ends: one call (MLflow retries what an HTTP server may answer later,
        with its own backoff and timeouts), then a warning (training results stay in the store)."""
        try:
            action()
            return True
        except Exception as exc:  # noqa: BLE001
            log.warning("could not %s: %s", what, first_line(exc))
            return False

    def finish(self, status: str, flush_timeout: float) -> int:
        """Queue the end status, flush, end the run locally; returns the records left in the spill file."""
        import mlflow

        self.buffer.log_status(status)
        left = self.buffer.close(flush_timeout)
        with no_retries():  # the status is delivered or spilled already: no minutes of retries, no second links
            try:
                mlflow.end_run(status)
            except Exception:  # noqa: BLE001 - the server is away; the spill file holds the status
                pass
        self._spill_lock.close()
        if self.buffer.loss_line:  # the server away and no room to keep what it missed: say so, exit 1
            raise DiskFull(self.buffer.loss_line)
        return left


def probe_server(uri: str, attempts: int = 3) -> None:
    """Fail in seconds, not after MLflow's minutes of retries, when the server is unreachable at start."""
    if not uri.startswith(("http://", "https://")):
        return
    import urllib.error
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(uri)
    health = urllib.parse.urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path.rstrip("/") + "/health",
                                      "", ""))
    for attempt in range(attempts):
        try:
            urllib.request.urlopen(health, timeout=10).close()
            return
        except urllib.error.HTTPError:
            return  # it answers (auth or proxy rules are judged by the real calls)
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            if attempt == attempts - 1:
                raise TrackingError(f"tracking: server {redact_text(uri)} unreachable ({reason}); "
                                    "allowed: a running MLflow server URL, or sqlite:///path/mlflow.db") from None
            time.sleep(1 + attempt)
