"""Model FLOPs (counted on the meta device), TFLOP/s and MFU, energy from counters, the advice line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from bridgetower_mlflow.accelerators.cpu import CpuAccelerator
from bridgetower_mlflow.accelerators.peaks import dense_peak
from bridgetower_mlflow.model.load import preset_config
from bridgetower_mlflow.samplers.rapl import RaplSampler
from bridgetower_mlflow.telemetry.flops import count_training_flops, flops_per_sample
from bridgetower_mlflow.telemetry.system.energy import EnergyWindow
from bridgetower_mlflow.train.advice import RunFacts, advice
from bridgetower_mlflow.train.efficiency import energy_metrics, flops_metrics

pytestmark = pytest.mark.gaudi_stack


@pytest.fixture(scope="module")
def tiny():
    return preset_config("tiny", 1000, 64)


@pytest.fixture(scope="module")
def one(tiny):
    return count_training_flops(tiny, 64, 32, batch=1)


def test_flops_scale_with_batch_and_rise_with_sequence_and_image(tiny, one):
    assert count_training_flops(tiny, 64, 32, batch=3) == pytest.approx(3 * one, rel=1e-3)  # B x B part: tiny
    assert count_training_flops(tiny, 64, 64) > one
    assert count_training_flops(tiny, 96, 32) > one


def test_the_same_configuration_gives_the_same_count_once(tiny, one, tmp_path, monkeypatch):
    monkeypatch.setenv("BRIDGETOWER_MLFLOW_CACHE", str(tmp_path))
    assert flops_per_sample(tiny, 64, 32) == one
    assert len(list((tmp_path / "flops").glob("*.json"))) == 1
    monkeypatch.setattr("bridgetower_mlflow.telemetry.flops.count_training_flops",
                        lambda *a, **k: pytest.fail("counted again"))
    assert flops_per_sample(tiny, 64, 32) == one


def _prepared(kind, name, precision="bf16", tf32=False, extra_tags=None):
    return SimpleNamespace(loaded=SimpleNamespace(model=SimpleNamespace(config=None), image=SimpleNamespace(size=64)),
                           recipe=SimpleNamespace(precision=precision), args=SimpleNamespace(tf32=tf32),
                           device=SimpleNamespace(kind=kind, device_name=name, extra_tags=extra_tags or {}))


def test_mfu_uses_the_dense_peak_of_the_device_and_precision(monkeypatch):
    monkeypatch.setattr("bridgetower_mlflow.telemetry.flops.flops_per_sample", lambda *a: 1.5e12)
    metrics = {"train_samples_per_second": 600.0}
    found, tags = flops_metrics(_prepared("h100", "NVIDIA H100 80GB HBM3"), metrics, devices=8, seq_len=128)
    assert found["train_model_tflops_per_second"] == pytest.approx(900.0)
    assert found["train_model_tflops_per_second_per_device"] == pytest.approx(112.5)
    assert found["train_mfu"] == pytest.approx(112.5e12 / 989.5e12) and tags == {}
    pcie, _ = flops_metrics(_prepared("h100", "NVIDIA H100 PCIe"), metrics, devices=8, seq_len=128)
    assert pcie["train_mfu"] == pytest.approx(112.5e12 / 756.5e12)
    tf32, _ = flops_metrics(_prepared("a100", "NVIDIA A100-SXM4-80GB", "fp32", tf32=True), metrics, 8, 128)
    assert tf32["train_mfu"] == pytest.approx(112.5e12 / 156e12)
    cpu, cpu_tags = flops_metrics(_prepared("cpu", "AMD EPYC"), metrics, devices=1, seq_len=128)
    assert "train_mfu" not in cpu and "no dense peak known for cpu" in cpu_tags["mfu.note"]
    gaudi_fp32, notes = flops_metrics(_prepared("gaudi2", "HL-225", "fp32"), metrics, 8, 128)
    assert "train_mfu" not in gaudi_fp32 and "no dense fp32 peak published for gaudi2" in notes["mfu.note"]


def test_every_peak_has_a_source():
    for kind in ("a100", "h100", "h200", "gaudi2", "gaudi3"):
        peak, _ = dense_peak(kind, kind, "bf16")
        assert peak.flops > 1e14 and peak.source


@pytest.mark.parametrize("kind, name, bf16", [
    ("h100", "NVIDIA H100 80GB HBM3", 989.5e12), ("h100", "NVIDIA H100 PCIe", 756.5e12),
    ("h100", "NVIDIA H100 NVL", 835.5e12), ("h200", "NVIDIA H200", 989.5e12), ("h200", "NVIDIA H200 NVL", 835.5e12),
    ("a100", "NVIDIA A100-SXM4-80GB", 312e12), ("a100", "NVIDIA A100-PCIE-40GB", 312e12),
    ("a100", "NVIDIA A100 80GB PCIe", 312e12),
])
def test_each_variant_has_its_own_peak(kind, name, bf16):
    peak, note = dense_peak(kind, name, "bf16")
    assert (peak.flops, note) == (bf16, "")


def test_h100_nvl_mfu_is_against_its_own_peak_not_the_sxm_one(monkeypatch):
    monkeypatch.setattr("bridgetower_mlflow.telemetry.flops.flops_per_sample", lambda *a: 1.5e12)
    found, tags = flops_metrics(_prepared("h100", "NVIDIA H100 NVL"), {"train_samples_per_second": 600.0}, 8, 128)
    assert found["train_mfu"] == pytest.approx(112.5e12 / 835.5e12) and tags == {}


@pytest.mark.parametrize("kind, name", [("h100", "NVIDIA H100 CNX"), ("a100", "NVIDIA A100X"),
                                        ("h200", "NVIDIA H200 NVL2")])
def test_an_unknown_variant_gets_no_peak_and_says_why(kind, name):
    peak, note = dense_peak(kind, name, "bf16")
    assert peak is None and name in note and "variant" in note


def test_a_mig_slice_gets_the_peak_of_its_share_of_the_sms():
    peak, note = dense_peak("h100", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bf16", sm_count=16)
    assert peak.flops == pytest.approx(989.5e12 * 16 / 132) and note == "" and "16 of 132 SMs" in peak.source
    a100, _ = dense_peak("a100", "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "tf32", sm_count=42)
    assert a100.flops == pytest.approx(156e12 * 42 / 108)


def test_a_runs_mfu_on_a_mig_slice_uses_the_sm_count_detection_tagged(monkeypatch):
    monkeypatch.setattr("bridgetower_mlflow.telemetry.flops.flops_per_sample", lambda *a: 1.5e12)
    device = _prepared("h100", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", extra_tags={"cuda.sm_count": "16"})
    found, tags = flops_metrics(device, {"train_samples_per_second": 10.0}, 1, 128)
    assert found["train_mfu"] == pytest.approx(15e12 / (989.5e12 * 16 / 132)) and tags == {}


def test_a_mig_slice_of_unknown_size_gets_no_mfu_and_a_note(monkeypatch):
    peak, note = dense_peak("h100", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bf16")
    assert peak is None and "MIG" in note and "1g.10gb" in note
    monkeypatch.setattr("bridgetower_mlflow.telemetry.flops.flops_per_sample", lambda *a: 1.5e12)
    found, tags = flops_metrics(_prepared("h100", "NVIDIA H100 80GB HBM3 MIG 1g.10gb"),
                                {"train_samples_per_second": 600.0}, 1, 128)
    assert "train_mfu" not in found and "MIG" in tags["mfu.note"]


class Counter:
    def __init__(self, *readings):
        self.readings = list(readings)

    def energy_joules(self):
        return self.readings.pop(0)


def test_energy_is_the_counters_difference_over_the_window():
    window = EnergyWindow([Counter(1000.0, 4000.0), Counter(50.0, 1050.0)])
    window.start()
    window.stop()
    found, tags = energy_metrics(window.joules(), window.note,
                                 {"train_samples_per_second": 10.0, "train_steady_state_seconds": 40.0}, whole_job=True)
    assert found == {"train_energy_joules": 4000.0, "train_joules_per_sample": 10.0} and tags == {}
    refused = EnergyWindow([Counter(None, None)])
    refused.start()
    refused.stop()
    assert "refused its energy counter" in energy_metrics(refused.joules(), refused.note, {}, True)[1]["energy.note"]
    none = EnergyWindow([])
    assert "no hardware energy counter" in energy_metrics(none.joules(), none.note, {}, True)[1]["energy.note"]
    assert "several hosts" in energy_metrics(window.joules(), window.note, {}, whole_job=False)[1]["energy.note"]


def _zone(root: Path, name: str, energy: int, span: int) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(str(energy))
    (zone / "max_energy_range_uj").write_text(str(span))
    return zone


def test_rapl_counts_across_a_wrap_and_skips_subzones(tmp_path):
    package = _zone(tmp_path, "intel-rapl:0", 900_000, 1_000_000)
    _zone(tmp_path, "intel-rapl:0:0", 5, 1_000_000)  # core subzone: inside the package, not added
    sampler = RaplSampler(tmp_path)
    (package / "energy_uj").write_text("200000")  # wrapped: 100_000 + 200_000 uJ later
    assert sampler.energy_joules() == pytest.approx(0.3)
    (package / "energy_uj").write_text("700000")
    assert sampler.energy_joules() == pytest.approx(0.8)


def test_no_powercap_means_no_cpu_energy_counter(tmp_path):
    with pytest.raises(FileNotFoundError):
        RaplSampler(tmp_path)
    if not Path("/sys/class/powercap").exists():  # this machine: the CPU adapter offers none
        assert CpuAccelerator("cpu").device_samplers(SimpleNamespace()) == []


@pytest.mark.parametrize("facts, expected", [
    (RunFacts(0.31, 1, 98.0, 16, None, True), "input-bound (wait 31%, workers at 98 % CPU): try "
                                              "dataloader_num_workers=2 or device_decode=true"),
    (RunFacts(0.31, 1, 99.0, 2, None, False), "every host core is taken"),
    (RunFacts(0.12, 2, 150.0, 16, 80.0, True), "partly input-bound (wait 12%): dataloader_num_workers=3"),
    (RunFacts(0.01, 2, 50.0, 16, 97.0, True), "compute-bound (wait 1%): more workers will not help"),
    (RunFacts(0.02, 2, 50.0, 16, 41.0, True), "the device is busy only 41 %"),
])
def test_advice_reads_the_wait_the_workers_and_the_device(facts, expected):
    assert expected in advice(facts)
