"""Gaudi detection through HLML (pyhlml)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from bridgetower_mlflow.accelerators.gaudi import detect as gaudi_detect  # noqa: E402
from bridgetower_mlflow.accelerators.gaudi.adapter import GaudiAccelerator  # noqa: E402
from bridgetower_mlflow.accelerators.gaudi.arguments import NATIVE_PATH  # noqa: E402
from bridgetower_mlflow.errors import AcceleratorUnavailable  # noqa: E402

from fakes import install_habana, install_pyhlml  # noqa: E402


@pytest.fixture(autouse=True)
def no_hl_smi(monkeypatch):
    monkeypatch.setattr(gaudi_detect.shutil, "which", lambda name: None)


def test_detect_through_hlml(monkeypatch):
    install_habana(monkeypatch)
    install_pyhlml(monkeypatch, name=b"HL-225", count=8)
    info = GaudiAccelerator("gaudi").detect(8, 8)
    assert (info.kind, info.device_name, info.count, info.memory_gb) == ("gaudi2", "HL-225", 8, 96.0)
    assert info.extra_tags["gaudi.path"] == NATIVE_PATH and info.extra_tags["gaudi.detected_by"] == "hlml"


def test_gaudi3_requested_on_gaudi2_names_both(monkeypatch):
    install_habana(monkeypatch)
    install_pyhlml(monkeypatch, name=b"HL-225")
    with pytest.raises(AcceleratorUnavailable,
                       match=r"gaudi3 requested but the detected device is 'HL-225' \(gaudi2\)"):
        GaudiAccelerator("gaudi3").detect(1, 1)
