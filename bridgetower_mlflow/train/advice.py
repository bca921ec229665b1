"""One derived line on what to change next, from the measured wait, the workers' CPU and the device's use."""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import INPUT_BOUND_BANDS


@dataclass(frozen=True)
class RunFacts:
    """What the advice reads: the loader wait, the CPU of the workers and of the host, the device's use."""

    wait_fraction: float
    workers: int
    workers_cpu_percent: float | None  # summed over the workers (100 = one core)
    host_cores: int
    device_utilization: float | None  # mean percent, where the device reports it
    device_decode_possible: bool  # the accelerator can decode on the device and this run did not


def advice(facts: RunFacts) -> str:
    moderate, high = (limit for limit, _ in INPUT_BOUND_BANDS)
    wait = f"wait {facts.wait_fraction:.0%}"
    if facts.wait_fraction >= high:
        return _input_bound(facts, wait)
    if facts.wait_fraction >= moderate:
        return f"partly input-bound ({wait}): dataloader_num_workers={facts.workers + 1} may help"
    if facts.device_utilization is not None and facts.device_utilization < 60:
        return (f"not input-bound ({wait}) but the device is busy only {facts.device_utilization:.0f} % of the time: "
                "the step is small for it; a larger per_device_train_batch_size may help")
    return f"compute-bound ({wait}): more workers will not help"


def _input_bound(facts: RunFacts, wait: str) -> str:
    cpu = facts.workers_cpu_percent
    busy = f", workers at {cpu:.0f} % CPU" if cpu is not None and facts.workers else ""
    decode = " or device_decode=true" if facts.device_decode_possible else ""
    spare_cores = facts.host_cores - facts.workers - 1
    if facts.workers and spare_cores <= 0:
        return (f"input-bound ({wait}{busy}) and every host core is taken: "
                f"{'device_decode=true' if decode else 'a host with more cores or a faster image path'}")
    return f"input-bound ({wait}{busy}): try dataloader_num_workers={facts.workers + 1}{decode}"
