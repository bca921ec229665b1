"""One derived line on what to change next, from the measured wait, the workers' CPU, the device's use and
the step's phases (the bottleneck verdict), naming the lever and the figure that supports it."""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import (
    BOTTLENECK_COMMUNICATION,
    BOTTLENECK_COMPUTE,
    BOTTLENECK_HOST,
    BOTTLENECK_INPUT,
    EPOCH_START_SHARE,
    INPUT_BOUND_BANDS,
)


@dataclass(frozen=True)
class Verdict:
    """The bottleneck (the `bottleneck` tag), the phase that names it, and that phase's share of the step."""

    name: str
    phase: str
    share: float


@dataclass(frozen=True)
class RunFacts:
    """What the advice reads: the loader wait, the CPU of the workers and of the host, the device's use."""

    wait_fraction: float
    workers: int
    workers_cpu_percent: float | None  # summed over the workers (100 = one core)
    host_cores: int
    device_utilization: float | None  # mean percent, where the device reports it
    device_decode_possible: bool  # the accelerator can decode on the device and this run did not
    verdict: Verdict | None = None  # from the phase breakdown, where the run has one
    batch_size: int = 0  # per device
    hpu_graphs_possible: bool = False  # Gaudi's GaudiTrainer without use_hpu_graphs_for_training
    fast_ddp_possible: bool = False  # optimum-habana's fast_ddp, not used by this multi-device run
    mfu_achievable: float | None = None
    workers_restart: bool = False  # the Trainer's loader starts its workers again each epoch (not persistent)
    epoch_start_extra_seconds: float = 0.0  # an epoch's first step beyond the other steps' median
    epoch_start_fraction: float = 0.0  # that extra, summed, as a share of the window


def advice(facts: RunFacts) -> str:
    moderate, high = (limit for limit, _ in INPUT_BOUND_BANDS)
    wait = f"wait {facts.wait_fraction:.0%}"
    verdict = facts.verdict
    if facts.wait_fraction >= high:
        return _input_bound(facts, wait)
    if verdict is not None and verdict.name == BOTTLENECK_INPUT:  # the device idles for data more than the host saw
        return _input_bound(facts, f"the device waits for data {verdict.share:.0%} of the step")
    if verdict is not None and verdict.name == BOTTLENECK_HOST:
        return _host_bound(facts, verdict.share)
    if verdict is not None and verdict.name == BOTTLENECK_COMMUNICATION:
        lever = ("distribution_strategy=fast_ddp" if facts.fast_ddp_possible
                 else f"a larger per_device_train_batch_size (now {facts.batch_size}): fewer all-reduces per sample")
        return f"communication-bound (the exposed all-reduce holds {verdict.share:.0%} of the step): try {lever}"
    if facts.workers_restart and facts.epoch_start_fraction >= EPOCH_START_SHARE:
        return (f"the loader starts its {facts.workers} worker(s) again at every epoch: an epoch's first step takes "
                f"{facts.epoch_start_extra_seconds:.2f} s more than the others' median "
                f"({facts.epoch_start_fraction:.0%} of the window): try hf_args='--dataloader_persistent_workers true'")
    if facts.wait_fraction >= moderate:
        return f"partly input-bound ({wait}): dataloader_num_workers={facts.workers + 1} may help"
    if facts.device_utilization is not None and facts.device_utilization < 60:
        return (f"not input-bound ({wait}) but the device is busy only {facts.device_utilization:.0f} % of the time: "
                "the step is small for it; a larger per_device_train_batch_size may help")
    return f"compute-bound ({wait}): more workers will not help" + _compute_share(facts)


def _compute_share(facts: RunFacts) -> str:
    if facts.verdict is None or facts.verdict.name != BOTTLENECK_COMPUTE:
        return ""
    mfu = (f", at {facts.mfu_achievable:.0%} of the device's measured matmul rate"
           if facts.mfu_achievable is not None else "")
    return f"; the device's phases hold {facts.verdict.share:.0%} of the step{mfu}"


def _host_bound(facts: RunFacts, share: float) -> str:
    lever = ("use_hpu_graphs_for_training=true (HPU graphs replay the step without the host's launches)"
             if facts.hpu_graphs_possible else
             f"a larger per_device_train_batch_size (now {facts.batch_size}) spreads the per-step host cost")
    return f"host-bound (the host's own work between the phases holds {share:.0%} of the step): try {lever}"


def _input_bound(facts: RunFacts, wait: str) -> str:
    cpu = facts.workers_cpu_percent
    busy = f", workers at {cpu:.0f} % CPU" if cpu is not None and facts.workers else ""
    decode = " or device_decode=true" if facts.device_decode_possible else ""
    spare_cores = facts.host_cores - facts.workers - 1
    if facts.workers and spare_cores <= 0:
        return (f"input-bound ({wait}{busy}) and every host core is taken: "
                f"{'device_decode=true' if decode else 'a host with more cores or a faster image path'}")
    return f"input-bound ({wait}{busy}): try dataloader_num_workers={facts.workers + 1}{decode}"
