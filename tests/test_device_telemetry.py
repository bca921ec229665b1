"""Device telemetry mapping: HLML / hl-smi readings -> hpu_{i}_... metrics (the monitor adds system/)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from bridgetower_mlflow.accelerators.gaudi import telemetry as hlml_sampler  # noqa: E402
from bridgetower_mlflow.accelerators.gaudi.adapter import GaudiAccelerator  # noqa: E402
from bridgetower_mlflow.accelerators.gaudi.telemetry import (  # noqa: E402
    HlmlSampler,
    HlSmiSampler,
    HpuReading,
    hpu_metrics,
    parse_hl_smi,
)

from fakes import install_pyhlml  # noqa: E402
from fakes.requests import device  # noqa: E402

HL_SMI = "0, 87, 40960, 98304, 512\n1, 0, 512, 98304, 97\n"


def test_hl_smi_csv_maps_to_hpu_metric_names():
    metrics = hpu_metrics(parse_hl_smi(HL_SMI))
    assert metrics["hpu_0_utilization_percentage"] == 87.0
    assert metrics["hpu_0_memory_usage_megabytes"] == pytest.approx(40960 * 2**20 / 1e6)  # MiB -> MLflow's MB
    assert metrics["hpu_0_power_usage_watts"] == 512.0
    assert metrics["hpu_0_memory_usage_percentage"] == 41.67
    assert metrics["hpu_1_power_usage_watts"] == 97.0 and len(metrics) == 8


def test_hl_smi_unexpected_output_is_an_error():
    with pytest.raises(ValueError, match="unexpected hl-smi line"):
        parse_hl_smi("N/A\n")
    reading = parse_hl_smi("0, N/A, 1, 2, 3")[0]
    assert reading.utilization is None and "hpu_0_utilization_percentage" not in hpu_metrics([reading])


def test_hlml_sampler_converts_units(monkeypatch):
    fake = install_pyhlml(monkeypatch, count=8, util=50, used=3 * 10**9, total=96 * 2**30, power_mw=420500)
    sampler = HlmlSampler(2)
    metrics = sampler.sample()
    assert metrics["hpu_1_utilization_percentage"] == 51.0  # the struct's .aip, not float(struct)
    assert metrics["hpu_0_memory_usage_megabytes"] == 3000.0  # 10^6 bytes, like MLflow's GPU megabytes
    assert metrics["hpu_0_power_usage_watts"] == 420.5
    assert not any(name.startswith("hpu_2") for name in metrics)
    sampler.close()
    assert fake.calls == ["init", "shutdown"]


def test_gaudi_samplers_prefer_hlml_then_hl_smi(monkeypatch, caplog):
    install_pyhlml(monkeypatch)
    assert isinstance(GaudiAccelerator("gaudi2").device_samplers(device("gaudi2", 8))[0], HlmlSampler)
    monkeypatch.setitem(sys.modules, "pyhlml", None)  # import fails as if not installed
    monkeypatch.setattr(hlml_sampler.shutil, "which", lambda name: "/usr/bin/hl-smi")
    monkeypatch.setattr(hlml_sampler, "run_hl_smi", lambda fields: HL_SMI)
    (sampler,) = GaudiAccelerator("gaudi2").device_samplers(device("gaudi2", 1))
    assert isinstance(sampler, HlSmiSampler)
    assert set(sampler.sample()) == {f"hpu_0_{m}" for m in (
        "utilization_percentage", "memory_usage_megabytes", "power_usage_watts", "memory_usage_percentage")}
    monkeypatch.setattr(hlml_sampler.shutil, "which", lambda name: None)
    with caplog.at_level(logging.WARNING):
        assert GaudiAccelerator("gaudi2").device_samplers(device("gaudi2", 1)) == []
    assert "HPU telemetry off" in caplog.text and "hl-smi is not on PATH" in caplog.text


def test_reading_without_total_has_no_percentage():
    assert "hpu_0_memory_usage_percentage" not in hpu_metrics([HpuReading(0, 1, 2, 0, 3)])


def test_the_fake_utilization_is_a_struct_like_the_real_one(monkeypatch):
    fake = install_pyhlml(monkeypatch)
    fake.hlmlInit()
    rates = fake.hlmlDeviceGetUtilizationRates(fake.hlmlDeviceGetHandleByIndex(0))
    assert (rates.aip, rates.memory) == (87, 5)
    with pytest.raises((TypeError, ValueError)):
        float(rates)  # what made every sample fail before


def test_one_refused_hlml_call_keeps_the_others(monkeypatch, caplog):
    install_pyhlml(monkeypatch, count=1, not_supported={"hlmlDeviceGetPowerUsage"})
    sampler = HlmlSampler(1)
    with caplog.at_level(logging.WARNING):
        first, second = sampler.sample(), sampler.sample()
    assert "hpu_0_power_usage_watts" not in first and first["hpu_0_utilization_percentage"] == 87.0
    assert first == second and caplog.text.count("power unavailable") == 1  # warned once, not every sample


def test_missing_libhlml_falls_back_to_hl_smi(monkeypatch, capsys):
    install_pyhlml(monkeypatch, library=False)
    monkeypatch.setattr(hlml_sampler.shutil, "which", lambda name: "/usr/bin/hl-smi")
    monkeypatch.setattr(hlml_sampler, "run_hl_smi", lambda fields: HL_SMI)
    (sampler,) = GaudiAccelerator("gaudi2").device_samplers(device("gaudi2", 1))
    assert isinstance(sampler, HlSmiSampler)
    assert "Failed to load libhlml" in capsys.readouterr().out  # what the real pyhlml prints
