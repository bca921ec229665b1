"""Log the fine-tuned model as a pyfunc (with processor) and optionally register a tagged version."""

from __future__ import annotations

import base64
import io
import json
import logging
import shutil
from pathlib import Path

from .pyfunc_model import INFERENCE_FILE, BridgeTowerPyfunc

log = logging.getLogger(__name__)
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def save_checkpoint(loaded, folder: Path, max_seq_length: int) -> Path:
    """save_pretrained of model, tokenizer and image processor plus the inference settings."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    model = loaded.model.module if hasattr(loaded.model, "module") else loaded.model
    model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    if loaded.image_processor is not None:
        loaded.image_processor.save_pretrained(folder)
    settings = {"image_size": loaded.image_size, "image_mean": list(loaded.image_mean),
                "image_std": list(loaded.image_std), "max_seq_length": max_seq_length, "source": loaded.source}
    (folder / INFERENCE_FILE).write_text(json.dumps(settings, indent=2))
    return folder


def _signature_and_example():
    import pandas as pd
    from mlflow.models import ModelSignature
    from mlflow.types.schema import AnyType, Array, ColSpec, Schema
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (96, 80), "white")
    ImageDraw.Draw(image).ellipse((20, 10, 70, 60), outline="black", width=3)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG")
    example = pd.DataFrame([{
        "image": base64.b64encode(buffer.getvalue()).decode(),
        "caption": "A cartoon of a sun in the middle.",
        "caption_choices": ["I told you the sun would follow us home.", "We said no boat on weekends."],
    }])
    inputs = Schema([ColSpec(AnyType(), "image"), ColSpec("string", "caption", required=False),
                     ColSpec(Array("string"), "caption_choices", required=False)])
    outputs = Schema([ColSpec("double", "score"), ColSpec("long", "best_choice"),
                      ColSpec(Array("double"), "choice_scores")])
    return ModelSignature(inputs=inputs, outputs=outputs), example


def log_pyfunc_model(checkpoint: Path, run_id: str, step: int):
    """Log the pyfunc on the active run; returns ModelInfo (model_uri models:/m-...)."""
    import mlflow

    signature, example = _signature_and_example()
    return mlflow.pyfunc.log_model(
        name="model",
        python_model=BridgeTowerPyfunc(),
        artifacts={"checkpoint": str(checkpoint)},
        code_paths=[str(PACKAGE_DIR)],
        signature=signature,
        input_example=example,
        pip_requirements=_requirements(),
        step=step,
    )


def _requirements() -> list[str]:
    from importlib import metadata

    pins = []
    for dist in ("torch", "transformers", "tokenizers", "pillow", "numpy", "pandas", "mlflow"):
        try:
            version = metadata.version(dist).split("+")[0]
            pins.append(f"{dist}=={version}")
        except metadata.PackageNotFoundError:
            pins.append(dist)
    return pins


def register_version(client, model_info, name: str, tags: dict[str, str], description: str):
    """Create a registered-model version of a logged model and tag it."""
    import mlflow

    version = mlflow.register_model(model_info.model_uri, name, tags=tags)
    client.update_model_version(name, version.version, description=description)
    return version
