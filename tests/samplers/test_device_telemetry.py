"""Device telemetry: HLML (the real pyhlml over a C stub of libhlml.so) and hl-smi readings -> hpu_{i}_... metrics."""

from __future__ import annotations

import logging
import sys

import pytest

from bridgetower_mlflow.accelerators.gaudi.adapter import GaudiAccelerator
from bridgetower_mlflow.contract import ADVICE_TAG, ENERGY_METRIC
from bridgetower_mlflow.launch.ranks import RankInfo
from bridgetower_mlflow.samplers import hl_smi as hl_smi_sampler
from bridgetower_mlflow.samplers.hl_smi import HlSmiSampler, parse_hl_smi
from bridgetower_mlflow.samplers.hlml import HlmlSampler
from bridgetower_mlflow.samplers.hpu_readings import HpuReading, hpu_metrics

from tests.fakes.native_libs import hlml_stub, hpus  # noqa: F401 - hlml_stub: a fixture
from tests.fakes.native_libs.observation import observe
from tests.fakes.requests import device

pytestmark = pytest.mark.gaudi_stack

HL_SMI = "0, 2, 87, 40960, 98304, 512\n1, 6, 0, 512, 98304, 97\n"  # index, module_id, then the readings


def indices(names) -> set[str]:
    return {name.removeprefix("system/").split("_")[1] for name in names if "hpu_" in name}


def test_hl_smi_csv_maps_to_hpu_metric_names():
    metrics = hpu_metrics(parse_hl_smi(HL_SMI))
    assert metrics["hpu_0_utilization_percentage"] == 87.0
    assert metrics["hpu_0_memory_usage_megabytes"] == pytest.approx(40960 * 2**20 / 1e6)  # MiB -> MLflow's MB
    assert metrics["hpu_0_power_usage_watts"] == 512.0
    assert metrics["hpu_0_memory_usage_percentage"] == 41.67
    assert metrics["hpu_1_power_usage_watts"] == 97.0 and len(metrics) == 8
    assert [r.module_id for r in parse_hl_smi(HL_SMI)] == [2, 6]


def test_hl_smi_unexpected_output_is_an_error():
    with pytest.raises(ValueError, match="unexpected hl-smi line"):
        parse_hl_smi("N/A\n")
    with pytest.raises(ValueError, match="expected index,module_id,"):
        parse_hl_smi("0, 87, 40960, 98304, 512\n")  # the columns before module_id was asked for
    reading = parse_hl_smi("0, 4, N/A, 1, 2, 3")[0]
    assert reading.utilization is None and "hpu_0_utilization_percentage" not in hpu_metrics([reading])


def test_hl_smi_sampler_follows_habana_visible_modules(monkeypatch):
    monkeypatch.setattr(hl_smi_sampler.shutil, "which", lambda name: "/usr/bin/hl-smi")
    monkeypatch.setattr(hl_smi_sampler, "run_hl_smi", lambda fields: HL_SMI + "2, 3, 55, 1, 98304, 300\n")
    monkeypatch.setenv("HABANA_VISIBLE_MODULES", "3,6")
    assert indices(HlSmiSampler(2).sample()) == {"1", "2"}
    assert indices(HlSmiSampler(1).sample()) == {"2"}  # module 3 is listed first
    monkeypatch.delenv("HABANA_VISIBLE_MODULES")
    assert indices(HlSmiSampler(2).sample()) == {"0", "1"}


def test_hlml_sampler_converts_units(hlml_stub):
    host = hpus(8)
    host[1].utilization, host[0].memory_used, host[0].power_mw = 51, 3 * 10**9, 420_500
    hlml_stub.set(host)
    sampler = HlmlSampler(2)
    metrics = sampler.sample()
    assert metrics["hpu_1_utilization_percentage"] == 51.0  # the struct's .aip, not float(struct)
    assert metrics["hpu_0_memory_usage_megabytes"] == 3000.0  # 10^6 bytes, like MLflow's GPU megabytes
    assert metrics["hpu_0_memory_usage_percentage"] == round(100 * 3e9 / (96 * 2**30), 2)
    assert metrics["hpu_0_power_usage_watts"] == 420.5 and indices(metrics) == {"0", "1"}
    assert sampler.energy_joules() == 10_000.0  # two counters of 5e6 mJ
    sampler.stop()
    calls = hlml_stub.calls()
    assert calls[0] == "hlml_init" and calls[-1] == "hlml_shutdown" and calls.count("hlml_shutdown") == 1


def test_hlml_utilization_is_a_struct(hlml_stub):
    import pyhlml

    pyhlml.hlmlInit()
    rates = pyhlml.hlmlDeviceGetUtilizationRates(pyhlml.hlmlDeviceGetHandleByIndex(0))
    assert (rates.aip, rates.memory) == (87, 5)
    with pytest.raises(ValueError):
        float(rates)  # a ctypes structure is a buffer, which float() parses as text: what failed every sample once
    pyhlml.hlmlShutdown()


def test_gaudi_samplers_prefer_hlml_then_hl_smi(hlml_stub, monkeypatch, caplog):
    assert isinstance(GaudiAccelerator("gaudi2").device_samplers(device("gaudi2", 8))[0], HlmlSampler)
    monkeypatch.setitem(sys.modules, "pyhlml", None)  # import fails as if not installed
    monkeypatch.setattr(hl_smi_sampler.shutil, "which", lambda name: "/usr/bin/hl-smi")
    monkeypatch.setattr(hl_smi_sampler, "run_hl_smi", lambda fields: HL_SMI)
    (sampler,) = GaudiAccelerator("gaudi2").device_samplers(device("gaudi2", 1))
    assert isinstance(sampler, HlSmiSampler)
    assert set(sampler.sample()) == {f"hpu_0_{m}" for m in (
        "utilization_percentage", "memory_usage_megabytes", "power_usage_watts", "memory_usage_percentage")}
    monkeypatch.setattr(hl_smi_sampler.shutil, "which", lambda name: None)
    with caplog.at_level(logging.WARNING):
        assert GaudiAccelerator("gaudi2").device_samplers(device("gaudi2", 1)) == []
    assert "HPU telemetry off" in caplog.text and "hl-smi is not on PATH" in caplog.text


def test_reading_without_total_has_no_percentage():
    assert "hpu_0_memory_usage_percentage" not in hpu_metrics([HpuReading(0, 1, 2, 0, 3)])


def test_one_refused_hlml_call_keeps_the_others(hlml_stub, caplog):
    host = hpus(1, not_supported={"hlml_device_get_power_usage", "hlml_device_get_total_energy_consumption"})
    hlml_stub.set(host)
    sampler = HlmlSampler(1)
    with caplog.at_level(logging.WARNING):
        first, second = sampler.sample(), sampler.sample()
    assert "hpu_0_power_usage_watts" not in first and first["hpu_0_utilization_percentage"] == 87.0
    assert first == second and caplog.text.count("power unavailable (HLML Error with code 3)") == 1  # warned once
    assert sampler.energy_joules() is None


def test_missing_libhlml_falls_back_to_hl_smi(hlml_stub, monkeypatch, capsys, caplog):
    hlml_stub.remove_library()
    monkeypatch.setattr(hl_smi_sampler.shutil, "which", lambda name: "/usr/bin/hl-smi")
    monkeypatch.setattr(hl_smi_sampler, "run_hl_smi", lambda fields: HL_SMI)
    with caplog.at_level(logging.WARNING):
        (sampler,) = GaudiAccelerator("gaudi2").device_samplers(device("gaudi2", 1))
    assert isinstance(sampler, HlSmiSampler)
    assert "Failed to load libhlml" in capsys.readouterr().out  # what the real pyhlml prints


def test_hlml_refusing_to_start_is_a_reason_not_a_crash(hlml_stub, monkeypatch, caplog):
    hlml_stub.set(init_error=9)  # libhlml present, the driver not loaded
    monkeypatch.setattr(hl_smi_sampler.shutil, "which", lambda name: None)
    with caplog.at_level(logging.WARNING):
        assert GaudiAccelerator("gaudi2").device_samplers(device("gaudi2", 1)) == []
    assert "HlmlSampler: HLMLError_DriverNotLoaded: HLML Error with code 9" in caplog.text


def test_only_the_jobs_hpus_are_logged_and_advised_on(hlml_stub, monkeypatch):
    """A shared 8-device host, busy at 95 %; the job holds modules 4 and 5 (HLML indices 5 and 6), busy at 20 and
    30 %: the system metrics, the energy and the advice are those two devices', named by HLML index."""
    host = hpus(8, utilization=95)
    host[5].utilization, host[6].utilization = 20, 30
    hlml_stub.set(host)
    monkeypatch.setenv("HABANA_VISIBLE_MODULES", "4,5")

    def run_a_while():
        for number, hpu in enumerate(host):
            hpu.energy_mj += 1000 * (number + 1)  # 6 J on index 5, 7 J on index 6, 23 J elsewhere
        hlml_stub.write()

    series, metrics, tags = observe(monkeypatch, GaudiAccelerator("gaudi2"), device("gaudi2", 2),
                                    RankInfo(0, 0, 2, 2), during=run_a_while)
    assert indices(series) == {"5", "6"} and series["system/hpu_5_utilization_percentage"][0] == 20.0
    assert not [name for name in series if name.startswith("system/gpu_")]
    assert "busy only 25 % of the time" in tags[ADVICE_TAG]
    assert metrics[ENERGY_METRIC] == pytest.approx(13.0)
