"""Gaudi detection through HLML: the real pyhlml over a C stub of libhlml.so."""

from __future__ import annotations

import pytest

from bridgetower_mlflow.accelerators.gaudi import detect as gaudi_detect
from bridgetower_mlflow.accelerators.gaudi.adapter import GaudiAccelerator
from bridgetower_mlflow.accelerators.gaudi.arguments import NATIVE_PATH, OPTIMUM_PATH
from bridgetower_mlflow.accelerators.installed import package_version
from bridgetower_mlflow.errors import AcceleratorUnavailable

from tests.fakes import install_habana
from tests.fakes.native_libs import hlml_stub, hpus  # noqa: F401 - hlml_stub: a fixture

pytestmark = pytest.mark.gaudi_stack


@pytest.fixture(autouse=True)
def no_hl_smi(monkeypatch):
    monkeypatch.setattr(gaudi_detect.shutil, "which", lambda name: None)


def test_detect_through_hlml(monkeypatch, hlml_stub):
    install_habana(monkeypatch)
    hlml_stub.set(hpus(8, name="HL-225"), driver="1.24.0-a2a5f9c")
    info = GaudiAccelerator("gaudi").detect(8, 8)
    assert (info.kind, info.device_name, info.count, info.memory_gb) == ("gaudi2", "HL-225", 8, 96.0)
    assert info.driver == "1.24.0-a2a5f9c"  # pyhlml answers bytes: decoded
    path = OPTIMUM_PATH if package_version("optimum-habana") else NATIVE_PATH  # what this environment holds
    assert info.extra_tags["gaudi.path"] == path and info.extra_tags["gaudi.detected_by"] == "hlml"
    calls = hlml_stub.calls()
    assert calls[0] == "hlml_init" and calls[-1] == "hlml_shutdown" and calls.count("hlml_init") == 1


def test_gaudi3_requested_on_gaudi2_names_both(monkeypatch, hlml_stub):
    install_habana(monkeypatch)
    hlml_stub.set(hpus(8, name="HL-225"))
    with pytest.raises(AcceleratorUnavailable,
                       match=r"gaudi3 requested but the detected device is 'HL-225' \(gaudi2\)"):
        GaudiAccelerator("gaudi3").detect(1, 1)


def test_hlml_counts_the_modules_the_job_may_use(monkeypatch, hlml_stub):
    """HABANA_VISIBLE_MODULES=3,7 on an 8-device host: two devices (HLML indices 2 and 3), facts from module 3's."""
    install_habana(monkeypatch)
    host = hpus(8, name="HL-325L")
    host[2].memory_total = 128 * 2**30  # module 3; index 0 (module 2) keeps 96 GiB
    hlml_stub.set(host)
    monkeypatch.setenv("HABANA_VISIBLE_MODULES", "3,7")
    info = GaudiAccelerator("gaudi3").detect(2, 2)
    assert (info.kind, info.count, info.memory_gb) == ("gaudi3", 2, 128.0)
    with pytest.raises(AcceleratorUnavailable, match=r"devices: invalid value 4 .*2 Gaudi device\(s\) visible"):
        GaudiAccelerator("gaudi3").detect(4, 4)


def test_without_libhlml_detection_goes_on_to_the_next_source(monkeypatch, hlml_stub, capsys):
    install_habana(monkeypatch, name="GAUDI2", count=2)
    hlml_stub.remove_library()
    info = GaudiAccelerator("gaudi2").detect(2, 2)
    assert info.extra_tags["gaudi.detected_by"] == "habana_frameworks" and info.count == 2
    assert "Failed to load libhlml" in capsys.readouterr().out
