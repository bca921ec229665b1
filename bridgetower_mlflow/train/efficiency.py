"""What a samples/s means for the chip: model FLOPs per sample, TFLOP/s, MFU against the dense peak,
and the device energy of the measured window. Unknown is said, never guessed (mfu.note, energy.note).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .prepare import Prepared

import logging

from ..accelerators.peaks import device_peak
from ..contract import (
    ACHIEVABLE_NOTE_TAG,
    ACHIEVABLE_TFLOPS_METRIC,
    ENERGY_METRIC,
    ENERGY_NOTE_TAG,
    JOULES_PER_SAMPLE_METRIC,
    MFU_ACHIEVABLE_METRIC,
    MFU_METRIC,
    MFU_NOTE_TAG,
    MODEL_FLOPS_METRIC,
    STEADY_SECONDS_METRIC,
    TFLOPS_METRIC,
    TFLOPS_PER_DEVICE_METRIC,
    THROUGHPUT_METRIC,
)

log = logging.getLogger(__name__)


def peak_precision(prepared: Prepared) -> str:
    """The precision the matmuls ran in: fp32 runs on Ampere and newer use TF32 tensor cores when enabled."""
    precision = prepared.recipe.precision
    return "tf32" if precision == "fp32" and getattr(prepared.args, "tf32", False) else precision


def flops_metrics(prepared: Prepared, metrics: dict[str, float], devices: int, seq_len: int
                  ) -> tuple[dict[str, float], dict[str, str]]:
    """(metrics, tags): model_flops_per_sample, train_model_tflops_per_second(_per_device), train_mfu or mfu.note."""
    from ..telemetry.flops import flops_per_sample

    loaded = prepared.loaded
    try:
        flops = flops_per_sample(loaded.model.config, loaded.image.size, seq_len)  # captions are padded to it
    except Exception as exc:  # noqa: BLE001 - a model the meta device cannot run: no FLOPs, said why
        log.warning("model FLOPs not measured: %s", exc)
        return {}, {MFU_NOTE_TAG: f"model FLOPs not measured ({type(exc).__name__}: {str(exc)[:200]})"}
    out = {MODEL_FLOPS_METRIC: flops}
    if THROUGHPUT_METRIC not in metrics:
        return out, {MFU_NOTE_TAG: "no steady-state throughput, so no TFLOP/s or MFU"}
    tflops = flops * metrics[THROUGHPUT_METRIC] / 1e12
    out.update({TFLOPS_METRIC: tflops, TFLOPS_PER_DEVICE_METRIC: tflops / devices})
    peak, why = device_peak(prepared.device, peak_precision(prepared))
    if peak is None:
        return out, {MFU_NOTE_TAG: why}
    out[MFU_METRIC] = tflops / devices * 1e12 / peak.flops
    return out, {}


def energy_metrics(joules: float | None, note: str, metrics: dict[str, float], whole_job: bool
                   ) -> tuple[dict[str, float], dict[str, str]]:
    """(metrics, tags): train_energy_joules and train_joules_per_sample over the window, or energy.note."""
    if not whole_job:
        return {}, {ENERGY_NOTE_TAG: "the run spans several hosts; the counters read here cover only this one"}
    if joules is None:
        return {}, {ENERGY_NOTE_TAG: note}
    out = {ENERGY_METRIC: joules}
    samples = metrics.get(THROUGHPUT_METRIC, 0) * metrics.get(STEADY_SECONDS_METRIC, 0)
    if samples:
        out[JOULES_PER_SAMPLE_METRIC] = joules / samples
    return out, {}



def achievable_metrics(metrics: dict[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """(metrics, tags): train_mfu_achievable against the measured matmul rate, or achievable.note."""
    achievable = metrics.get(ACHIEVABLE_TFLOPS_METRIC)
    if not achievable:
        return {}, {ACHIEVABLE_NOTE_TAG: "the device's matmul rate was not measured (see the run's log)"}
    if TFLOPS_PER_DEVICE_METRIC not in metrics:
        return {}, {ACHIEVABLE_NOTE_TAG: "no model TFLOP/s to set against the measured matmul rate"}
    return {MFU_ACHIEVABLE_METRIC: metrics[TFLOPS_PER_DEVICE_METRIC] / achievable}, {}
