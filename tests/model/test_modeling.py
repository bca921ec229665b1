"""Presets built from configs (offline): sizes, tokenizer, processor that round-trips through save."""

import pytest
import torch
from PIL import Image

from bridgetower_mlflow.model.load import count_parameters, load_model, preset_config

pytestmark = pytest.mark.gaudi_stack


def test_large_preset_is_the_866m_checkpoint_layout():
    from transformers import BridgeTowerForContrastiveLearning

    config = preset_config("large", 1000, 128)
    with torch.device("meta"):
        model = BridgeTowerForContrastiveLearning(config)
    assert 860e6 < count_parameters(model) < 870e6
    vision = config.vision_config
    assert (vision.patch_size, vision.image_size, config.contrastive_hidden_size) == (14, 294, 512)


def test_tiny_preset_trains_a_step_and_its_processor_survives_save_pretrained(cache_dir, tmp_path):
    from transformers import AutoImageProcessor, AutoTokenizer

    loaded = load_model("tiny", 32, seed=0)
    tokens = loaded.tokenizer(["A cartoon of a sun on the left."] * 2, padding="max_length", max_length=32,
                              return_tensors="pt")
    pixels = torch.randn(2, 3, loaded.image.size, loaded.image.size)
    out = loaded.model(pixel_values=pixels, input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"],
                       return_loss=True)
    out.loss.backward()
    assert torch.isfinite(out.loss)
    loaded.model.save_pretrained(tmp_path)
    loaded.tokenizer.save_pretrained(tmp_path)
    loaded.image_processor.save_pretrained(tmp_path)
    processor = AutoImageProcessor.from_pretrained(tmp_path)
    assert processor(Image.new("RGB", (800, 650)), return_tensors="pt")["pixel_values"].shape[-1] == loaded.image.size
    assert AutoTokenizer.from_pretrained(tmp_path)("a sun")["input_ids"][0] == 0


def test_unknown_checkpoint_is_a_config_error(monkeypatch):
    from bridgetower_mlflow.errors import ConfigError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="^model: invalid value '/no/such/dir'"):
        load_model("/no/such/dir", 128, 0)
