"""The run of `train`, in two visits to MLflow: open_run (start, params, dataset inputs) and close (metrics,
tags, description, model, status). Ranks other than 0, and untracked runs, get a NullRun whose calls do
nothing (Lightning's rank_zero_experiment / _DummyExperiment), so the flow never asks "am I tracked?".
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..contract import (
    ADVICE_TAG,
    ERROR_TAG,
    INPUT_BOUND_TAG,
    NOTE_TAG,
    RESUMED_FROM_TAG,
    RESUMED_RUN_TAG,
    RUN_KIND_RESUME,
    RUN_KIND_TAG,
    THROUGHPUT_METRIC,
    THROUGHPUT_NOTE_TAG,
    WAIT_METRIC,
    input_bound_label,
)
from ..environment import DEFAULT_FLUSH_TIMEOUT_S, RunEnvironment
from ..errors import ConfigError, DiskFull
from ..launch.collectives import barrier, broadcast_from_main
from ..launch.signals import Stopped
from ..redact import first_line
from ..telemetry.sinks import NullSink
from .checkpoints.output_folder import writes_into
from .checkpoints.resume import as_resumed, project_run_of_resume, remember_run, run_to_resume
from .checkpoints.upload import settle_uploads
from .observe import system_series
from .record import describe, run_name, start_tags, train_params
from .result import TrainResult

if TYPE_CHECKING:
    from ..config import TrainConfig
    from ..launch.ranks import RankInfo
    from ..tracking.session import RunSession
    from .prepare import Prepared
    from .result import Fitted, Measured

log = logging.getLogger(__name__)
STOP_FLUSH_TIMEOUT = 10.0  # inside Kubernetes' 30 s grace; what is not sent by then is in the spill file


def start_session(config: TrainConfig, prepared: Prepared, project_run_id: str | None) -> RunSession:
    """Rank 0's run: new, resumed (`resume=true`) or the one `mlflow run` / a sweep created."""
    from ..tracking.context import context_tags
    from ..tracking.session import RunSession

    resume_id = run_to_resume(config, project_run_id)
    if resume_id:
        from .checkpoints.resume_checks import ready_to_resume

        ready_to_resume(config, prepared, resume_id)  # refusals before the run is touched; the checkpoint here
    tags = {**context_tags(), **start_tags(config, prepared)}
    return RunSession.start(config.experiment_name, run_name(config, prepared.device.kind), tags, resume_id,
                            project_run_id)


def open_run(config: TrainConfig, prepared: Prepared, ranks: RankInfo, environment: RunEnvironment,
             tracked: bool = True) -> TrackedRun | NullRun:
    """The first visit: start (or resume) the run, its dataset inputs and params; every rank learns its id."""
    from ..model.load import count_parameters

    project_run_id = environment.project_run_id
    session = start_session(config, prepared, project_run_id) if ranks.is_main and tracked else None
    run = TrackedRun(session, project_run_of_resume(session.run_id if config.resume else None, project_run_id),
                     environment.flush_timeout_s) if session is not None else None
    try:
        if session is not None:
            with writes_into(config.output_dir):
                remember_run(config.output_dir, session.run_id)
            from .dataset_inputs import log_dataset_inputs

            log_dataset_inputs(config, prepared.data)
        run_id = broadcast_from_main(session.run_id if session else project_run_id, ranks)
        if session is not None:
            params = train_params(config, prepared, count_parameters(prepared.loaded.model))
            session.log_params(as_resumed(params, session.existing_params) if config.resume else params)
            if config.resume:
                session.delete_tag(ERROR_TAG)  # what stopped the last attempt no longer describes the run
    except BaseException as exc:
        if run is not None:
            run.fail(exc)
        raise
    return run or NullRun(run_id)


@contextlib.contextmanager
def run_lifecycle(run: TrackedRun | NullRun) -> Iterator[TrackedRun | NullRun]:
    """Inside: the run's life. Whatever escapes ends it: KILLED on a stop signal (the Stopped raised again with
    the run it ended), FAILED with the reason otherwise; a run that closed itself is left as it is."""
    try:
        yield run
    except Stopped as exc:
        stopped = exc.at(run_id=run.run_id)
        run.fail(stopped)
        raise stopped from None
    except BaseException as exc:
        run.fail(exc)
        raise


class NullRun:
    """A rank that does not talk to MLflow: it trains, measures and waits for rank 0 at the end."""

    session = None
    sink = NullSink()

    def __init__(self, run_id: str | None):
        self.run_id = run_id

    def resumed_from(self, step: int) -> None:
        pass

    def close(self, config: TrainConfig, prepared: Prepared, fitted: Fitted, measured: Measured,
              ranks: RankInfo) -> TrainResult:
        barrier(ranks)
        return TrainResult(self.run_id, measured.metrics)

    def fail(self, exc: BaseException) -> None:
        pass


class TrackedRun:
    """Rank 0's run; whatever happens, it does not stay RUNNING (nor does the project run of a resume)."""

    def __init__(self, session: RunSession, project_run: str | None = None,
                 flush_timeout_s: float = DEFAULT_FLUSH_TIMEOUT_S) -> None:
        self.session, self.run_id, self.sink = session, session.run_id, session.buffer
        self.flush_timeout_s = flush_timeout_s  # how long the end waits for the server (BRIDGETOWER_FLUSH_TIMEOUT)
        self.project_run = project_run  # `mlflow run -P resume=true`'s own run: it records what it resumed
        if project_run:
            self._mark_project_run()

    def _mark_project_run(self) -> None:
        note = f"resume of run {self.run_id}: its steps, metrics and model are logged there, not in this run"
        tags = {RESUMED_RUN_TAG: self.run_id, RUN_KIND_TAG: RUN_KIND_RESUME, NOTE_TAG: note}
        try:
            for key, value in tags.items():
                self.session.client.set_tag(self.project_run, key, value)
        except Exception as exc:  # noqa: BLE001 - the resumed run is what matters; mlflow run ends this one
            log.warning("could not tag the project run %s: %s", self.project_run, first_line(exc))

    def _settle_project_run(self, status: str, reason: str = "") -> None:
        """The project run ends as the run it resumed did (mlflow run would mark it by exit status only)."""
        if not self.project_run:
            return
        from ..tracking.runs import settle_run
        from ..tracking.session import no_retries

        try:
            with no_retries():
                settle_run(self.session.client, self.project_run, status, reason)
        except Exception as exc:  # noqa: BLE001 - the server is away: mlflow run marks it by our exit status
            log.warning("could not end the project run %s: %s", self.project_run, first_line(exc))

    def resumed_from(self, step: int) -> None:
        self.session.set_tags({RESUMED_FROM_TAG: str(step)})

    def close(self, config: TrainConfig, prepared: Prepared, fitted: Fitted, measured: Measured,
              ranks: RankInfo) -> TrainResult:
        """The second visit, which only writes: every node's worker series, the final metrics, the findings' tags,
        the description, the model, FINISHED."""
        for key, value, step, timestamp in system_series(measured.node_series):
            self.sink.log_metric(key, value, step, timestamp)
        metrics = measured.metrics
        self.session.set_tags(measured.tags)
        settle_uploads(self.run_id, self.flush_timeout_s)  # the last checkpoint whole on the server, then the end
        version = self._record(config, prepared, fitted.trainer, measured, self._uploaded(config))
        barrier(ranks)
        left = self.session.finish("FINISHED", self.flush_timeout_s)
        self._settle_project_run("FINISHED")
        spill = str(self.session.buffer.spill_path) if left else None
        return TrainResult(self.run_id, metrics, version, left, spill, config.target)

    def _uploaded(self, config: TrainConfig) -> tuple[str, ...]:
        """The run's whole checkpoints on the server (their LoggedModels point there)."""
        if not config.checkpoint_upload:
            return ()
        from .checkpoints.remote import list_remote

        try:
            return list_remote(self.session.client, self.run_id).whole
        except Exception as exc:  # noqa: BLE001 - then the models point at the run folder
            log.warning("could not list the uploaded checkpoints: %s", first_line(exc))
            return ()

    def _record(self, config: TrainConfig, prepared: Prepared, trainer: Any, measured: Measured,
                uploaded: tuple[str, ...]) -> str | None:
        """Final metrics, tags and description into the run's buffer; the evaluated checkpoints and the model
        logged. Returns the registered version."""
        from ..model.publish import publish_model
        from .logged_models import record_checkpoints

        session, metrics, advice = self.session, measured.metrics, measured.tags[ADVICE_TAG]
        bound = input_bound_label(metrics[WAIT_METRIC])
        final = {k: float(v) for k, v in metrics.items() if v is not None and k not in measured.logged}
        session.buffer.log_metrics(final, trainer.state.global_step)
        session.set_tags({INPUT_BOUND_TAG: bound})
        if THROUGHPUT_METRIC not in metrics:
            session.set_tags({THROUGHPUT_NOTE_TAG: f"no steady-state throughput: the run (resumed) had no step left "
                                                   f"after the {config.throughput_warmup_steps} warmup steps"})
        session.set_description(describe(config, prepared, metrics, bound, advice))
        if not config.log_model:
            return None
        # log_model links to the model only the metrics already stored at its step: the final figures go first
        if not session.buffer.flush(self.flush_timeout_s):
            log.warning("the final metrics are not in the store yet (%d records queued): the logged model will not "
                        "carry them", session.buffer.pending())
        best = record_checkpoints(config, trainer, session, uploaded)
        with writes_into(config.output_dir):
            return publish_model(config, prepared, session, trainer, metrics, best)

    def fail(self, exc: BaseException) -> None:
        """KILLED on a stop signal, FAILED with the reason otherwise; a refused resume leaves the run as it was.

        Everything queued is on disk first: a SIGKILL at the end of a grace period then loses nothing."""
        status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
        if isinstance(exc, ConfigError) and self.session.previous_status:
            status = self.session.previous_status
        else:
            self.session.set_tags({ERROR_TAG: first_line(exc)})
        self.session.buffer.persist()
        # an upload in flight may finish inside the grace: a resume elsewhere then starts from it
        settle_uploads(self.run_id, STOP_FLUSH_TIMEOUT if status == "KILLED" else min(self.flush_timeout_s, 60))
        try:
            self.session.finish(status, STOP_FLUSH_TIMEOUT if status == "KILLED" else min(self.flush_timeout_s, 30))
        except DiskFull as lost:  # what failed the run comes first; the records lost with it are a warning
            log.warning("%s", lost)
        outcome = "KILLED" if status == "KILLED" else "FAILED"
        self._settle_project_run(outcome, f"the resumed run {self.run_id} did not finish: {first_line(exc)}")
