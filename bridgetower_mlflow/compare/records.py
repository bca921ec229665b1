"""MLflow `train` runs -> RunRecord: paged, filtered server-side, normalized from raw params/tags; a long read
says how far it got on stderr."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from ..contract import (
    ACCELERATOR_TAG,
    BOTTLENECK_TAG,
    DATA_LOADER_TAG,
    DECODE_TAG,
    DEVICE_COUNT_TAG,
    DEVICE_NAME_TAG,
    EPOCH_START_EXTRA_FRACTION_METRIC,
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
    SWEEP_CELL_TAG,
    TFLOPS_METRIC,
    THROUGHPUT_METRIC,
    THROUGHPUT_PER_DEVICE_METRIC,
    WAIT_METRIC,
    WARMUP_TAG,
)
from ..shell_words import canonical_hf_args
from .phases import Phases, read_phases
from .repeats import FailedRepeat, failed_repeat
from .run_quality import RunQuality, read_quality

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

TRAIN_FILTER = f"tags.`{RUN_KIND_TAG}` = '{RUN_KIND_TRAIN}'"
PAGE_SIZE = 5000
MEASURED = "measured"
UNKNOWN_DECODE = "unknown"  # a run logged before train wrote its decode tag
PROGRESS_INTERVAL_S = 2.0  # at most one line this often, so a fast store does not flood the terminal


@dataclass(frozen=True)
class RunRecord:
    """One finished train run (or one published number), reduced to what comparison needs."""

    run_id: str
    run_name: str
    experiment_id: str
    accelerator: str
    device_name: str
    model: str
    dataset: str
    dataset_config: str
    per_device_train_batch_size: str
    devices: str
    precision: str
    max_seq_length: str
    distribution_strategy: str
    throughput_warmup_steps: str
    dataloader_num_workers: int
    decode: str  # cpu | device | cpu-fallback (asked device decode, CPU ran) | other loader name
    data_loader: str
    samples_per_second: float
    samples_per_second_per_device: float | None = None
    train_runtime: float | None = None
    dataloader_wait_fraction: float | None = None
    input_bound: str = ""
    source: str = MEASURED  # `measured`, or the citation of a published number
    parent_run_id: str = ""
    model_tflops_per_second: float | None = None  # efficiency metrics: only where train measured them
    mfu: float | None = None
    joules_per_sample: float | None = None
    device_peak_memory_gb: float | None = None  # the main device's peak, where the device reports one
    image_backend: str = "fast"  # the CPU image transform (runs from before the option ran the fast one)
    phase_fractions: Phases = ()  # ((phase, share of the step), ...): only where train measured phases
    phase_seconds: Phases = ()  # ((phase, seconds per step), ...)
    phases_merged: str = ""  # what the run merged (Gaudi lazy mode: forward+backward)
    bottleneck: str = ""
    host_cpu_count: str = ""  # the host's cores (what CPU devices share)
    sweep_cell: str = ""  # the sweep grid cell this run repeats, where a sweep ran it
    hf_args: str = ""  # the user's extra TrainingArguments flags, canonical (canonical_hf_args)
    epoch_start_fraction: float | None = None  # what epochs' first steps cost beyond the others, share of the window
    per_device_eval_batch_size: str = ""  # eval_loss uses in-batch negatives: it changes with the eval batch
    quality: RunQuality = RunQuality()  # final eval metrics; with a target, how long it took to reach it


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
