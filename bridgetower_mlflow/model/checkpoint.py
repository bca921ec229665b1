"""What a logged model holds: save_pretrained of model, tokenizer and image processor plus inference settings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

INFERENCE_FILE = "bridgetower_inference.json"


def save_checkpoint(loaded, folder: Path, max_seq_length: int) -> Path:
    """Write `loaded` (modeling.LoadedModel) to `folder`, replacing what was there."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    model = loaded.model.module if hasattr(loaded.model, "module") else loaded.model
    model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    if loaded.image_processor is not None:
        loaded.image_processor.save_pretrained(folder)
    image = loaded.image
    settings = {"image_size": image.size, "image_mean": list(image.mean), "image_std": list(image.std),
                "max_seq_length": max_seq_length, "source": loaded.source}
    (folder / INFERENCE_FILE).write_text(json.dumps(settings, indent=2))
    return folder
