"""The device's achievable matmul rate: its FLOPs counted by torch's own FlopCounterMode, bounded in time,
measured once per device name, dtype and software versions (the cache folder)."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bridgetower_mlflow.telemetry.achievable_peak import achievable_tflops, measure_matmul_rate


def test_the_rate_is_the_counted_flops_over_the_measured_seconds():
    rate = measure_matmul_rate(torch.device("cpu"), torch.float32, lambda: None, budget=1.0)
    a = torch.ones(rate.size, rate.size)
    with FlopCounterMode(display=False) as counter:
        torch.mm(a, a, out=torch.empty_like(a))
    assert rate.flops == counter.get_total_flops() * rate.count
    assert rate.tflops == pytest.approx(rate.flops / rate.seconds / 1e12) and 0 < rate.tflops < 100


def test_it_is_measured_once_per_device_dtype_and_software_and_within_five_seconds(tmp_path, monkeypatch):
    monkeypatch.setenv("BRIDGETOWER_MLFLOW_CACHE", str(tmp_path))
    started = time.perf_counter()
    first = achievable_tflops(torch.device("cpu"), "fp32", lambda: None, "AMD EPYC", {"torch": "2.13"})
    assert time.perf_counter() - started < 5.0 and first > 0
    monkeypatch.setattr("bridgetower_mlflow.telemetry.achievable_peak.measure_matmul_rate",
                        lambda *a, **k: pytest.fail("measured again"))
    assert achievable_tflops(torch.device("cpu"), "fp32", lambda: None, "AMD EPYC", {"torch": "2.13"}) == first
    assert len(list((tmp_path / "achievable").glob("*.json"))) == 1
    for other in (("bf16", "AMD EPYC", {"torch": "2.13"}), ("tf32", "AMD EPYC", {"torch": "2.13"}),
                  ("fp32", "Intel Xeon", {"torch": "2.13"}), ("fp32", "AMD EPYC", {"torch": "2.14"})):
        precision, name, software = other
        with pytest.raises(pytest.fail.Exception, match="measured again"):
            achievable_tflops(torch.device("cpu"), precision, lambda: None, name, software)
