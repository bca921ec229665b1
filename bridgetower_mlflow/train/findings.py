"""What a run's figures mean, as pure functions of what was measured: efficiency, energy, the phase tags, the
bottleneck verdict and the advice line."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

from ..contract import (
    ADVICE_TAG,
    BOTTLENECK_COMMUNICATION,
    BOTTLENECK_COMPUTE,
    BOTTLENECK_HOST,
    BOTTLENECK_INPUT,
    BOTTLENECK_SHARE,
    BOTTLENECK_TAG,
    ENERGY_NOTE_TAG,
    EPOCH_START_EXTRA_FRACTION_METRIC,
    EPOCH_START_EXTRA_SECONDS_METRIC,
    MFU_ACHIEVABLE_METRIC,
    PHASE_ALL_REDUCE,
    PHASE_DATA_WAIT,
    PHASE_OTHER,
    PHASES,
    PHASES_CLOCK_TAG,
    PHASES_MERGED_TAG,
    PHASES_NOTE_TAG,
    WAIT_METRIC,
    phase_fraction_metric,
)
from .advice import RunFacts, Verdict, advice
from .efficiency import achievable_metrics, energy_metrics, flops_metrics

if TYPE_CHECKING:
    from ..config import TrainConfig
    from ..telemetry.steps.step_timing import PhaseReport
    from .prepare import Prepared



class Observed(Protocol):
    """What the findings read of observe.Observed (rank 0's telemetry, read once when training ended)."""

    @property
    def workers_cpu_percent(self) -> float | None: ...
    @property
    def device_utilization(self) -> float | None: ...
    @property
    def energy_joules(self) -> float | None: ...
    @property
    def energy_note(self) -> str: ...
    @property
    def whole_job(self) -> bool: ...
    @property
    def host_cores(self) -> int | None: ...
    @property
    def phases(self) -> PhaseReport | None: ...


# what each verdict but compute reads: the phase whose share of the step names it
VERDICT_PHASES = ((BOTTLENECK_INPUT, PHASE_DATA_WAIT), (BOTTLENECK_HOST, PHASE_OTHER),
                  (BOTTLENECK_COMMUNICATION, PHASE_ALL_REDUCE))


def bottleneck(metrics: dict[str, float]) -> Verdict | None:
    """input, host or communication when its phase holds >= 20 % of the step (the largest such), else compute;
    None without a phase breakdown."""
    if phase_fraction_metric(PHASE_OTHER) not in metrics:
        return None
    shares = [Verdict(name, phase, metrics.get(phase_fraction_metric(phase), 0.0)) for name, phase in VERDICT_PHASES]
    found = max(shares, key=lambda verdict: verdict.share)
    if found.share >= BOTTLENECK_SHARE:
        return found
    waiting = sum(verdict.share for verdict in shares)
    return Verdict(BOTTLENECK_COMPUTE, "the device's phases", 1.0 - waiting)


def phase_tags(report: PhaseReport | None, metrics: dict[str, float], world_size: int) -> dict[str, str]:
    """phases.clock, phases.merged (what merged and why) and phases.note (what is absent and why)."""
    if report is None or report.timing is None or report.error:
        why = report.error if report is not None and report.error else "the phases were not timed"
        return {PHASES_NOTE_TAG: f"no phase breakdown: {why}"}
    timing = report.timing
    tags = {PHASES_CLOCK_TAG: timing.source}
    if phase_fraction_metric(PHASE_OTHER) not in metrics:
        return {**tags, PHASES_NOTE_TAG: "no phase breakdown: no measured step (each step was warmup or profiled)"}
    merged = [f"{name} = {' + '.join(parts)}" for name, parts in report.merged]
    tags[PHASES_MERGED_TAG] = ("; ".join(merged) + f": {timing.merged_why}" if merged
                               else f"nothing merged: every phase boundary is marked on the {timing.source}")
    notes = []
    for phase in (p for p in PHASES if phase_fraction_metric(p) not in metrics):
        holder = next((name for name, parts in report.merged if phase in parts), None)
        if phase == PHASE_ALL_REDUCE:
            why = ("one device, no gradient all-reduce" if world_size == 1
                   else report.all_reduce or timing.all_reduce or "not timed")
            notes.append(f"{phase}: {why}")
        elif holder is not None:
            notes.append(f"{phase}: inside {holder}")
        else:
            notes.append(f"{phase}: not measured")
    tags[PHASES_NOTE_TAG] = "; ".join([*notes, *timing.notes]) or "every phase measured"
    return tags


def findings(config: TrainConfig, prepared: Prepared, metrics: dict[str, float], observed: Observed
             ) -> tuple[dict[str, float], dict[str, str]]:
    """(metrics, tags) to add: efficiency, energy, the phases' tags, the verdict and the advice."""
    flops, flops_tags = flops_metrics(prepared, metrics, prepared.device.count, config.max_seq_length)
    energy, energy_tags = energy_metrics(observed.energy_joules, observed.energy_note,
                                         {} if config.profile_steps else metrics, observed.whole_job)
    if config.profile_steps and energy:  # the counters' window spans the profiled steps; the samples do not
        energy_tags = {ENERGY_NOTE_TAG: "no train_joules_per_sample: the energy window spans the profiled steps "
                                        f"{config.profile_steps}, which the measured samples leave out"}
    achievable, achievable_tags = achievable_metrics({**metrics, **flops})
    verdict = bottleneck(metrics)
    facts = RunFacts(
        wait_fraction=metrics.get(WAIT_METRIC, 0.0), workers=config.dataloader_num_workers,
        workers_cpu_percent=observed.workers_cpu_percent, host_cores=observed.host_cores or os.cpu_count() or 1,
        device_utilization=observed.device_utilization,
        device_decode_possible=bool(prepared.adapter.device_decode_loader_name) and prepared.device_loader is None,
        verdict=verdict, batch_size=config.per_device_train_batch_size,
        hpu_graphs_possible=getattr(prepared.args, "use_hpu_graphs_for_training", None) is False,
        fast_ddp_possible=("fast_ddp" in prepared.adapter.distribution_strategies and config.devices > 1
                           and config.distribution_strategy != "fast_ddp"),
        mfu_achievable=achievable.get(MFU_ACHIEVABLE_METRIC),
        workers_restart=(config.dataloader_num_workers > 0 and prepared.device_loader is None
                         and not prepared.args.dataloader_persistent_workers),
        epoch_start_extra_seconds=metrics.get(EPOCH_START_EXTRA_SECONDS_METRIC, 0.0),
        epoch_start_fraction=metrics.get(EPOCH_START_EXTRA_FRACTION_METRIC, 0.0))
    phases = phase_tags(observed.phases, metrics, prepared.device.count)
    tags = {**flops_tags, **energy_tags, **achievable_tags, **phases, ADVICE_TAG: advice(facts)}
    if verdict is not None:
        tags[BOTTLENECK_TAG] = verdict.name
    return {**flops, **energy, **achievable}, tags
