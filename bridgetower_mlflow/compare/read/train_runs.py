"""MLflow's train runs -> RunRecords: paged, filtered server-side, normalized from raw params, tags and metrics
(the phase breakdown, what the run learned); failed sweep repeats kept for their cells; a long read says how far it
got on stderr."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from ...contract import (
    ACCELERATOR_TAG,
    BOTTLENECK_TAG,
    DATA_LOADER_TAG,
    DECODE_TAG,
    DEVICE_COUNT_TAG,
    DEVICE_NAME_TAG,
    EPOCH_START_EXTRA_FRACTION_METRIC,
    ERROR_TAG,
    EVAL_SAMPLES_INTERVAL_METRIC,
    HOST_CPU_COUNT_TAG,
    INPUT_BOUND_TAG,
    JOULES_PER_SAMPLE_METRIC,
    MFU_METRIC,
    PARENT_RUN_TAG,
    PEAK_MEMORY_METRIC,
    PHASES_MERGED_TAG,
    PRECISION_TAG,
    RUN_KIND_TAG,
    RUN_KIND_TRAIN,
    RUN_NAME_TAG,
    RUNTIME_METRIC,
    SAMPLES_TO_TARGET_METRIC,
    STEPS_TO_TARGET_METRIC,
    SWEEP_CELL_TAG,
    SWEEP_REPEAT_TAG,
    TARGET_BEST_METRIC,
    TARGET_METRICS,
    TARGET_REACHED_TAG,
    TARGET_TAG,
    TFLOPS_METRIC,
    THROUGHPUT_METRIC,
    THROUGHPUT_PER_DEVICE_METRIC,
    TIME_TO_TARGET_METRIC,
    TIME_TO_TARGET_TRAIN_METRIC,
    TRUE_WORDS,
    WAIT_METRIC,
    WARMUP_TAG,
    phase_fraction_metric,
    phase_seconds_metric,
)
from ...errors import ConfigError
from ...shell_words import canonical_hf_args
from ...target import parse_target
from ..analysis.runs import PHASE_ORDER, FailedRepeat, Phases, QualityKey, RunQuality, RunRecord

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

TRAIN_FILTER = f"tags.`{RUN_KIND_TAG}` = '{RUN_KIND_TRAIN}'"
PAGE_SIZE = 5000
UNKNOWN_DECODE = "unknown"  # a run logged before train wrote its decode tag
FAILED_STATUS = "FAILED"
REASON_LIMIT = 200  # characters of a failed repeat's reason shown beside the cell
STOP_PARAM = "stop_at_target"  # train's TrainConfig field, logged as a param
PROGRESS_INTERVAL_S = 2.0  # at most one line this often, so a fast store does not flood the terminal


@dataclass(frozen=True)
class FetchedRuns:
    """Records plus what was left out, so reports can say what they did not use."""

    records: list[RunRecord] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)  # status or reason -> count
    failed_repeats: list[FailedRepeat] = field(default_factory=list)  # failed sweep children, kept for their cells


def normalize_int(value: object, default: str = "") -> str:
    """'2', '2.0' -> '2'; anything else as given (trimmed), so odd values stay visible."""
    if value is None:
        return default
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


def record_from_run(run: Run) -> RunRecord | None:
    """A RunRecord from an mlflow Run that followed train's contract; None without throughput."""
    params, tags, metrics = run.data.params, run.data.tags, run.data.metrics
    throughput = metrics.get(THROUGHPUT_METRIC)
    if throughput is None:
        return None
    data_loader = tags.get(DATA_LOADER_TAG, "")
    dataset_config = params.get("dataset_config", "")
    fractions, seconds = read_phases(metrics)
    return RunRecord(
        run_id=run.info.run_id,
        run_name=run.info.run_name or tags.get(RUN_NAME_TAG, ""),
        experiment_id=run.info.experiment_id,
        accelerator=(tags.get(ACCELERATOR_TAG) or params.get("accel") or "unknown").lower(),
        device_name=tags.get(DEVICE_NAME_TAG, ""),
        model=params.get("model", ""),
        dataset=params.get("dataset", ""),
        dataset_config=dataset_config,
        per_device_train_batch_size=normalize_int(params.get("per_device_train_batch_size")),
        devices=normalize_int(tags.get(DEVICE_COUNT_TAG) or params.get("devices"), "1"),
        precision=tags.get(PRECISION_TAG) or params.get("precision", ""),
        max_seq_length=normalize_int(params.get("max_seq_length")),
        distribution_strategy=params.get("distribution_strategy", ""),
        throughput_warmup_steps=normalize_int(
            tags.get(WARMUP_TAG) or params.get("throughput_warmup_steps"), "unknown"
        ),
        dataloader_num_workers=int(float(normalize_int(params.get("dataloader_num_workers"), "0") or 0)),
        decode=tags.get(DECODE_TAG) or UNKNOWN_DECODE,
        data_loader=data_loader or "unknown",
        samples_per_second=float(throughput),
        samples_per_second_per_device=metrics.get(THROUGHPUT_PER_DEVICE_METRIC),
        train_runtime=metrics.get(RUNTIME_METRIC),
        dataloader_wait_fraction=metrics.get(WAIT_METRIC),
        input_bound=tags.get(INPUT_BOUND_TAG, ""),
        parent_run_id=tags.get(PARENT_RUN_TAG, ""),
        model_tflops_per_second=metrics.get(TFLOPS_METRIC),
        mfu=metrics.get(MFU_METRIC),
        joules_per_sample=metrics.get(JOULES_PER_SAMPLE_METRIC),
        device_peak_memory_gb=metrics.get(PEAK_MEMORY_METRIC),
        image_backend=params.get("image_backend") or "fast",
        phase_fractions=fractions, phase_seconds=seconds, phases_merged=tags.get(PHASES_MERGED_TAG, ""),
        bottleneck=tags.get(BOTTLENECK_TAG, ""), host_cpu_count=tags.get(HOST_CPU_COUNT_TAG, ""),
        sweep_cell=tags.get(SWEEP_CELL_TAG, ""), hf_args=canonical_hf_args(params.get("hf_args") or ""),
        epoch_start_fraction=metrics.get(EPOCH_START_EXTRA_FRACTION_METRIC),
        per_device_eval_batch_size=normalize_int(params.get("per_device_eval_batch_size")),
        quality=read_quality(params, tags, metrics),
    )


def read_phases(metrics: dict[str, float]) -> tuple[Phases, Phases]:
    """(fractions, seconds per step) of the phases a run logged, in PHASE_ORDER; empty where it logged none."""
    fractions = tuple((p, float(metrics[phase_fraction_metric(p)])) for p in PHASE_ORDER
                      if metrics.get(phase_fraction_metric(p)) is not None)
    seconds = tuple((p, float(metrics[phase_seconds_metric(p)])) for p in PHASE_ORDER
                    if metrics.get(phase_seconds_metric(p)) is not None)
    return fractions, seconds


def read_quality(params: Mapping[str, str], tags: Mapping[str, str], metrics: Mapping[str, float]) -> RunQuality:
    """A run's RunQuality from its params, tags and metrics; ValueError for a target train could not have written."""
    text = tags.get(TARGET_TAG) or params.get("target") or ""
    try:
        target = parse_target(text)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    finals = tuple((name, float(metrics[name])) for name in TARGET_METRICS if metrics.get(name) is not None)
    if target is None:
        return RunQuality(finals=finals)
    stops = str(params.get(STOP_PARAM, "true")).strip().lower() in TRUE_WORDS
    reached = tags.get(TARGET_REACHED_TAG, "").strip().lower() == "true" if TARGET_REACHED_TAG in tags else (
        metrics.get(SAMPLES_TO_TARGET_METRIC) is not None)
    return RunQuality(
        key=QualityKey(str(target), stops), reached=reached,
        time_to_target=_if(reached, metrics.get(TIME_TO_TARGET_METRIC)),
        time_to_target_train=_if(reached, metrics.get(TIME_TO_TARGET_TRAIN_METRIC)),
        samples_to_target=_if(reached, metrics.get(SAMPLES_TO_TARGET_METRIC)),
        steps_to_target=_if(reached, metrics.get(STEPS_TO_TARGET_METRIC)),
        best_value=metrics.get(TARGET_BEST_METRIC), eval_samples_interval=metrics.get(EVAL_SAMPLES_INTERVAL_METRIC),
        finals=finals,
    )


def _if(reached: bool, value: float | None) -> float | None:
    """A to-target figure counts only on a run that reached its target (MLPerf: a non-converged run has none)."""
    return float(value) if reached and value is not None else None


def failed_repeat(run: Run) -> FailedRepeat | None:
    """The failed repeat an ended sweep child run is; None for a run that is not one (or did not fail)."""
    tags = run.data.tags
    if run.info.status != FAILED_STATUS or not tags.get(SWEEP_CELL_TAG) or not tags.get(PARENT_RUN_TAG):
        return None
    reason = (tags.get(ERROR_TAG) or "no reason recorded").splitlines()[0][:REASON_LIMIT]
    return FailedRepeat(tags[PARENT_RUN_TAG], tags[SWEEP_CELL_TAG], tags.get(SWEEP_REPEAT_TAG, "?"),
                        run.info.run_id, reason)


class ReadProgress:
    """Counts the runs compare reads, page by page; silent while everything fits in one page.

    stdout carries the report, so the lines go to `stream` (stderr unless given).
    """

    def __init__(self, stream: TextIO | None = None, interval: float = PROGRESS_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._stream, self._interval, self._clock = stream, interval, clock
        self._started = clock()
        self._last: float | None = None
        self.runs = 0
        self.pages = 0

    def page(self, runs: int, more: bool) -> None:
        """One page of `runs` was read; `more` when the search has another page."""
        self.runs += runs
        self.pages += 1
        if not (more or self._last is not None):
            return  # a single-page read stays silent
        now = self._clock()
        if self._last is None or now - self._last >= self._interval:
            self._last = now
            self._write(f"compare: read {self.runs} runs so far (page {self.pages}, more to come)...")

    def done(self) -> None:
        """The closing line, only when progress was shown."""
        if self._last is not None:
            self._write(f"compare: read {self.runs} runs in {self.pages} pages "
                        f"({self._clock() - self._started:.1f} s)")

    def _write(self, line: str) -> None:
        stream = self._stream or sys.stderr  # looked up late: a test runner swaps sys.stderr
        stream.write(line + "\n")
        stream.flush()


def combine_filters(*filters: str | None) -> str:
    """AND together the non-empty filter strings (MLflow's grammar has neither OR nor parentheses)."""
    return " AND ".join(part.strip() for part in filters if part and part.strip())


def iterate_runs(client: MlflowClient, experiment_ids: list[str], filter_string: str, page_size: int | None = None,
                 progress: ReadProgress | None = None) -> Iterator[Run]:
    """Every run matching the filter, page by page, without building a DataFrame.

    `progress` hears of each page as it arrives.
    """
    token = None
    while True:
        page = client.search_runs(
            experiment_ids, filter_string=filter_string, max_results=page_size or PAGE_SIZE, page_token=token
        )
        token = page.token
        if progress is not None:
            progress.page(len(page), more=bool(token))
        yield from page
        if not token:
            return


def fetch_run_records(client: MlflowClient, experiment_ids: list[str], extra_filter: str = "",
                      progress: ReadProgress | None = None) -> FetchedRuns:
    """Finished train runs as RunRecords; unfinished/failed ones counted by status, failed sweep repeats kept."""
    records, left_out, failures = [], Counter[str](), []
    finished = combine_filters(TRAIN_FILTER, "attributes.status = 'FINISHED'", extra_filter)
    for run in iterate_runs(client, experiment_ids, finished, progress=progress):
        try:
            record = record_from_run(run)
        except (TypeError, ValueError):
            # a hand-edited or foreign run with unparsable numbers is left out, not fatal
            left_out["FINISHED with unreadable params"] += 1
            continue
        if record is None:
            left_out["FINISHED without train_samples_per_second"] += 1
        else:
            records.append(record)
    others = combine_filters(TRAIN_FILTER, "attributes.status != 'FINISHED'", extra_filter)
    for run in iterate_runs(client, experiment_ids, others, progress=progress):
        left_out[run.info.status] += 1
        failures += [failure] if (failure := failed_repeat(run)) is not None else []
    if progress is not None:
        progress.done()
    return FetchedRuns(records, left_out, failures)


def accelerators_found(client: MlflowClient, experiment_ids: list[str]) -> list[str]:
    """Accelerator tags of any train runs in these experiments (for the nothing-matched error)."""
    seen: set[str] = set()
    for run in iterate_runs(client, experiment_ids, TRAIN_FILTER):
        seen.add(run.data.tags.get(ACCELERATOR_TAG) or run.data.params.get("accel") or "unknown")
    return sorted(seen)
