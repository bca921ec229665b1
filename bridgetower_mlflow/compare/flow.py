"""compare, end to end: read (scope, train runs) -> analysis (sections, headline) -> report and charts (files) -> a
logged `compare` run."""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..contract import NOTE_LIMIT, NOTE_TAG, RUN_KIND_COMPARE, RUN_KIND_TAG
from ..disk_space import writing
from ..environment import project_run_id
from ..errors import ConfigError
from ..redact import first_line, redact_text
from ..tracking.links import TRAINING_VIEW
from ..tracking.runs import FAILED, FINISHED, create_run, mark_training_experiment, settle_run
from .analysis.gate import GateResult, check_gate
from .analysis.headline import build_headline
from .analysis.published_pairs import build_published_pairs
from .analysis.speedups import build_sections
from .analysis.stats import unmatched_notes
from .comparison import Comparison
from .options import CompareOptions, ParsedOptions, parse_options
from .read.eval_series import SeriesSet, fetch_eval_series
from .read.scope import CompareScope, nothing_matched, resolve_scope
from .read.train_runs import FetchedRuns, ReadProgress, fetch_run_records
from .references.published import ALL_CAVEATS, OWN_LARGEST_BATCH_SOURCES, reference_notes, reference_records
from .report import export, render
from .report.gate_file import gate_json, write_gate
from .report.results import log_results

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

__all__ = ["CompareOptions", "CompareOutcome", "build_comparison", "run_compare", "ui_links"]
ARTIFACT_DIR = "compare"
GATE_ARTIFACT = "gate.json"


@dataclass(frozen=True)
class CompareOutcome:
    """What a compare produced: the comparison, its report, and where its files and run went."""

    comparison: Comparison
    text: str
    markdown: str
    files: tuple[Path, ...] = ()
    logged_run_id: str | None = None
    links: tuple[str, ...] = ()
    gate: GateResult | None = None
    gate_file: Path | None = None


def build_comparison(client: MlflowClient, options: CompareOptions,
                     parsed: ParsedOptions | None = None) -> tuple[Comparison, CompareScope]:
    """Fetch matching train runs and build the tables; raises NoMatchingRuns or ConfigError."""
    parsed = parsed or parse_options(options)
    scope = resolve_scope(client, options.experiment_names, options.experiment_ids,
                          options.filter_string, options.parent_run_id)
    fetched = _fetch(client, scope)
    if not fetched.records:
        raise nothing_matched(client, scope, fetched)
    records = fetched.records + reference_records(parsed.reference)
    present = sorted({r.accelerator for r in records})
    if parsed.baseline and parsed.baseline not in present:
        raise ConfigError("baseline", options.baseline, "accelerators present: " + ", ".join(present))
    sections = build_sections(records, parsed.baseline, parsed.allow_diff, tuple(fetched.failed_repeats))
    comparison = Comparison(
        sections=tuple(sections), baseline=parsed.baseline, allow_diff=parsed.allow_diff,
        run_count=len(fetched.records), left_out=dict(fetched.left_out), experiments=tuple(scope.describe()),
        notes=tuple(_notes(parsed, fetched, present)), headline=tuple(build_headline(sections)), prices=parsed.prices,
        published_pairs=tuple(build_published_pairs(sections, OWN_LARGEST_BATCH_SOURCES)),
    )
    return comparison, scope


def _notes(parsed: ParsedOptions, fetched: FetchedRuns, present: list[str]) -> list[str]:
    """What the report says before its tables: the baseline rule, references, failed cells, missing prices."""
    notes = [] if parsed.baseline else ["Baseline per configuration: a100 where present, else the first accelerator."]
    notes += reference_notes(parsed.reference)
    swept = {(r.parent_run_id, r.sweep_cell) for r in fetched.records if r.sweep_cell}
    notes += unmatched_notes(fetched.failed_repeats, swept)
    unpriced = [name for name in present if parsed.prices and name not in parsed.prices.usd_per_device_hour]
    if unpriced:
        notes.append("No price given for: " + ", ".join(unpriced) + " (their cost cells read -).")
    return notes


def _fetch(client: MlflowClient, scope: CompareScope) -> FetchedRuns:
    from mlflow.exceptions import MlflowException

    try:
        return fetch_run_records(client, scope.experiment_ids, scope.filter_string, progress=ReadProgress())
    except MlflowException as exc:
        if exc.error_code != "INVALID_PARAMETER_VALUE":
            raise
        raise ConfigError("filter", scope.filter_string,
                          f"an MLflow filter joined with AND ({first_line(exc)})") from None


def write_outputs(comparison: Comparison, output_dir: Path, with_gate: bool = False,
                  field: str = "output_dir", series: SeriesSet | None = None) -> list[Path]:
    """report.md, report.txt, speedups.csv, speedups.json, the PNG charts (and gate.json when written); a full
    disk is DiskFull's one line naming `field` (the option that chose the folder). `series`: the evaluations
    the time-to-quality chart draws."""
    with writing(field, "the comparison's report, tables and charts", output_dir):
        return _write_outputs(comparison, output_dir, with_gate, series)


def _write_outputs(comparison: Comparison, output_dir: Path, with_gate: bool, series: SeriesSet | None) -> list[Path]:
    from .charts.bar_charts import write_charts

    output_dir.mkdir(parents=True, exist_ok=True)
    contents = {
        "report.md": render.to_markdown(comparison, ALL_CAVEATS),
        "report.txt": render.to_text(comparison, ALL_CAVEATS),
        "speedups.csv": export.to_csv(comparison),
        "speedups.json": export.to_json(comparison, ALL_CAVEATS),
    }
    contents.update(export.quality_csvs(comparison))
    if with_gate:
        contents[GATE_ARTIFACT] = gate_json(comparison)
    paths = []
    for name, text in contents.items():
        path = output_dir / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths + write_charts(comparison, output_dir, series)


def run_compare(options: CompareOptions, client: MlflowClient | None = None) -> CompareOutcome:
    """The compare command's work, minus printing (and minus the gate's exit status)."""
    from mlflow.tracking import MlflowClient

    parsed = parse_options(options)  # bad options fail before the tracking server is asked anything
    client = client or MlflowClient()
    comparison, scope = build_comparison(client, options, parsed)
    gate = None
    if parsed.gate_document is not None:
        gate = check_gate(comparison.sections, parsed.gate_document, parsed.tolerance, options.gate.strip(),
                          parsed.quality_tolerance)
        comparison = comparison.with_notes(gate.lines())
    gate_file = write_gate(comparison, options.write_gate.strip()) if options.write_gate.strip() else None
    outcome = CompareOutcome(comparison, render.to_text(comparison, ALL_CAVEATS),
                             render.to_markdown(comparison, ALL_CAVEATS), gate=gate, gate_file=gate_file)
    if not (options.output_dir or options.log_to_mlflow):
        return outcome
    with tempfile.TemporaryDirectory(prefix="bridgetower-compare-") as scratch:
        output_dir = Path(options.output_dir or scratch)
        files = write_outputs(comparison, output_dir, with_gate=gate_file is not None,
                              field="output_dir" if options.output_dir else "TMPDIR",
                              series=fetch_eval_series(client, list(comparison.sections)))
        run_id = log_compare_run(client, options, scope, outcome, output_dir) if options.log_to_mlflow else None
    # without an output folder the scratch copies are gone; the artifacts hold them
    return dataclasses.replace(outcome, files=tuple(files) if options.output_dir else (), logged_run_id=run_id,
                               links=tuple(ui_links(client, scope, run_id)))


def _summary_tags(options: CompareOptions, scope: CompareScope, outcome: CompareOutcome) -> dict[str, str]:
    comparison, gate = outcome.comparison, outcome.gate
    return {
        "compare.baseline": comparison.baseline or "auto",
        "compare.allow_diff": ",".join(comparison.allow_diff),
        "compare.reference": options.reference or "none",
        "compare.filter": scope.filter_string[:5000],
        "compare.experiments": ", ".join(scope.describe())[:5000],
        "compare.run_count": str(comparison.run_count),
        "compare.sections": str(len(comparison.sections)),
        "compare.prices": comparison.prices.spec() or "none",
        "compare.price_source": comparison.prices.source[:5000] if comparison.prices else "",
        "compare.gate": options.gate.strip()[:5000],
        "compare.gate_result": (" ".join(filter(None, (gate.summary(), gate.quality_summary())))
                                if gate else "not checked")[:5000],
        "compare.write_gate": str(outcome.gate_file or "")[:5000],
    }


def _note(markdown: str) -> str:
    if len(markdown) <= NOTE_LIMIT:
        return markdown
    suffix = f"\n\n... truncated; the full report is the artifact {ARTIFACT_DIR}/report.md"
    return markdown[: NOTE_LIMIT - len(suffix)] + suffix


def log_compare_run(client: MlflowClient, options: CompareOptions, scope: CompareScope, outcome: CompareOutcome,
                    output_dir: Path) -> str:
    """Log outputs on the sweep parent, on `mlflow run`'s run, or on a new `compare` run."""
    from mlflow.entities import RunTag

    tags = _summary_tags(options, scope, outcome)
    tags[NOTE_TAG] = _note(outcome.markdown)
    run_id = options.parent_run_id or project_run_id() or ""
    created = not run_id
    if created:
        name = f"compare {outcome.comparison.run_count} runs"
        run_id = create_run(client, scope.experiment_ids[0], name, {RUN_KIND_TAG: RUN_KIND_COMPARE})
    elif not options.parent_run_id:
        tags[RUN_KIND_TAG] = RUN_KIND_COMPARE  # the run `mlflow run -e compare` created
        mark_training_experiment(client, client.get_run(run_id).info.experiment_id)
    try:
        client.log_batch(run_id, tags=[RunTag(key, value) for key, value in tags.items()])
        with writing("tracking", "the comparison's artifacts", _artifact_folder(client, run_id)):
            client.log_artifacts(run_id, str(output_dir), ARTIFACT_DIR)
        log_results(client, run_id, outcome.comparison, outcome.gate)
    except BaseException as exc:
        if created:  # the run this call made does not stay RUNNING
            settle_run(client, run_id, FAILED, first_line(exc))
        raise
    if created:
        settle_run(client, run_id, FINISHED)
    return run_id


def _artifact_folder(client: MlflowClient, run_id: str) -> str:
    """Where the run's artifacts are written: a local folder for a file store, else the store's URI."""
    return str(client.get_run(run_id).info.artifact_uri).removeprefix("file://")


def ui_links(client: MlflowClient, scope: CompareScope, run_id: str | None) -> list[str]:
    """Runs-view (and compare run) links when the tracking server is http(s)."""
    uri = getattr(client, "tracking_uri", "") or ""
    if not str(uri).startswith(("http://", "https://")):
        return []
    base = redact_text(str(uri).rstrip("/"))  # a library caller's client may still hold user:password@
    links = [f"{base}/#/experiments/{exp_id}/runs?{TRAINING_VIEW}"
             for exp_id in scope.experiment_ids[:5]]
    if run_id:
        experiment_id = client.get_run(run_id).info.experiment_id
        links.append(f"{base}/#/experiments/{experiment_id}/runs/{run_id}?{TRAINING_VIEW}")
    return links
