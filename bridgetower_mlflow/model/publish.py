"""After training: save the checkpoint, log the pyfunc model (with only the code serving needs), register it."""

from __future__ import annotations

import base64
import contextlib
import io
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from ..contract import (
    ACCELERATOR_TAG,
    CAPTION_MATCH_METRIC,
    CHECKPOINT_STEP_TAG,
    DATA_LOADER_TAG,
    DATASET_FINGERPRINT_TAG,
    DATASET_TAG,
    DEVICE_COUNT_TAG,
    DEVICE_NAME_TAG,
    EVAL_FINGERPRINT_TAG,
    MODEL_PRESET_TAG,
    MODEL_URI_TAG,
    REGISTERED_MODEL_TAG,
    THROUGHPUT_METRIC,
)
from ..disk_space import disk_errno, ensure_room, full_line, written_file
from ..errors import DiskFull, TrackingError
from .checkpoint import save_checkpoint

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# What a served model imports of this package; nothing else travels with it.
SERVING_MODULES = ("__init__.py", "model/__init__.py", "model/checkpoint.py", "model/pyfunc.py",
                   "model/scoring.py", "data/__init__.py", "data/cpu_images.py", "environment.py", "errors.py")
ERROR_LIMIT = 400  # MLflow's message names the URL twice; the run's error tag keeps 2000 characters
MODEL_ADVICE = "free space there or choose another output_dir"
SMALL_FILES_BYTES = 256 << 10  # tokenizer, image processor, config and inference settings (a real write past
# this estimate is still one line: writes_into)
VERSION_METRICS = (THROUGHPUT_METRIC, "eval_loss", "eval_recall_at_1", "eval_recall_at_5",
                   CAPTION_MATCH_METRIC)


def signature_and_example():
    """The pyfunc's input/output schema and a one-row example (a drawn JPEG as base64)."""
    import pandas as pd
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Array, ColSpec, Schema
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
    # Plain string columns, so that CSV bodies parse too (MLflow derives CSV dtypes from the schema and has none
    # for AnyType or Array). Object cells pass string enforcement unchanged: image stays a path, base64 or raw
    # bytes, caption_choices a list, or a JSON list in a string (what a CSV cell can carry).
    inputs = Schema([ColSpec("string", "image"), ColSpec("string", "caption", required=False),
                     ColSpec("string", "caption_choices", required=False)])
    outputs = Schema([ColSpec("double", "score"), ColSpec("long", "best_choice"),
                      ColSpec(Array("double"), "choice_scores")])
    return ModelSignature(inputs=inputs, outputs=outputs), example


def serving_package(folder: Path) -> Path:
    """A copy of the package holding only SERVING_MODULES, for the model's code_paths."""
    root = Path(folder) / PACKAGE_DIR.name
    for name in SERVING_MODULES:
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGE_DIR / name, target)
    return root


def requirements() -> list[str]:
    from importlib import metadata

    pins = []
    for dist in ("torch", "transformers", "tokenizers", "pillow", "numpy", "pandas", "mlflow"):
        try:
            pins.append(f"{dist}=={metadata.version(dist).split('+')[0]}")
        except metadata.PackageNotFoundError:
            pins.append(dist)
    return pins


def log_pyfunc_model(checkpoint: Path, step: int):
    """Log the pyfunc on the active run; returns ModelInfo (model_uri models:/m-...)."""
    import mlflow

    from .pyfunc import BridgeTowerPyfunc

    signature, example = signature_and_example()
    with tempfile.TemporaryDirectory(prefix="bridgetower-serving-") as scratch:
        return mlflow.pyfunc.log_model(
            name="model", python_model=BridgeTowerPyfunc(), artifacts={"checkpoint": str(checkpoint)},
            code_paths=[str(serving_package(Path(scratch)))], signature=signature, input_example=example,
            pip_requirements=requirements(), step=step,
        )


def register_version(client, model_info, name: str, tags: dict[str, str], description: str):
    """Create a registered-model version of a logged model and tag it."""
    import mlflow

    version = mlflow.register_model(model_info.model_uri, name, tags=tags)
    client.update_model_version(name, version.version, description=description)
    return version


def version_tags(config, prepared, metrics: dict, run_id: str) -> dict[str, str]:
    device = prepared.device
    tags = {ACCELERATOR_TAG: device.kind, DEVICE_NAME_TAG: device.device_name,
            DEVICE_COUNT_TAG: str(device.count), "run_id": run_id, DATASET_TAG: config.dataset,
            DATASET_FINGERPRINT_TAG: prepared.data.fingerprint,
            EVAL_FINGERPRINT_TAG: prepared.data.eval_fingerprint, MODEL_PRESET_TAG: config.model,
            DATA_LOADER_TAG: prepared.data_loader}
    tags.update({k: f"{metrics[k]:.6g}" for k in VERSION_METRICS if metrics.get(k) is not None})
    return tags


@dataclass(frozen=True)
class BestCheckpoint:
    """The evaluated checkpoint register_as registers instead of the last model: its step, folder and metrics."""

    step: int
    folder: Path
    metrics: dict


def publish_model(config, prepared, session, trainer, metrics: dict, best: BestCheckpoint | None = None) -> str | None:
    """Save, log and (with register_as) register the final model, or `best` where it is an earlier checkpoint
    (logged then as a servable model of its own, at its step); returns the registered version number or None."""
    from mlflow.tracking import MlflowClient

    from ..redact import redact_text

    step = trainer.state.global_step
    info = _log_model(config, prepared, trainer.model, Path(prepared.args.output_dir) / "final-model", step)
    session.set_tags({MODEL_URI_TAG: info.model_uri})
    if not config.register_as:
        return None
    if best is not None and best.step != step:
        model = type(_unwrapped(trainer.model)).from_pretrained(best.folder)  # on the host: only saved again
        info = _log_model(config, prepared, model, Path(prepared.args.output_dir) / "best-model", best.step)
        step, metrics = best.step, {**metrics, **best.metrics}
    tags = {**version_tags(config, prepared, metrics, session.run_id), CHECKPOINT_STEP_TAG: str(step)}
    device = prepared.device
    description = redact_text(f"{device.kind} x{device.count}, model {config.model}, run {session.run_id}, step "
                              f"{step}: {metrics.get(THROUGHPUT_METRIC, 0):.1f} samples/s")
    with tracking_refusal(f"register the model as {config.register_as!r}"):
        version = register_version(MlflowClient(), info, config.register_as, tags, description)
    session.set_tags({REGISTERED_MODEL_TAG: f"{config.register_as}/{version.version}"})
    return str(version.version)


def _log_model(config, prepared, model, folder: Path, step: int):
    """Save `model` with the run's tokenizer and image processor into `folder`, log it as the pyfunc at `step`."""
    ensure_room("output_dir", folder.name, folder.parent, model_bytes(model), MODEL_ADVICE, "the model's parameters")
    save_checkpoint(replace(prepared.loaded, model=model), folder, config.max_seq_length)
    with tracking_refusal("log the model"):
        return log_pyfunc_model(folder, step)


def _unwrapped(model):
    return model.module if hasattr(model, "module") else model


@contextlib.contextmanager
def tracking_refusal(action: str):
    """An upload or registry call that failed (after MLflow's retries) becomes one `tracking:` line.

    Cut to what the run's error tag keeps (first_line's 2000 characters), so the tag and the line agree.
    """
    import requests
    from mlflow.exceptions import MlflowException

    from ..tracking.failures import tracking_error

    try:
        yield
    except (MlflowException, requests.RequestException, OSError) as exc:
        code = disk_errno(exc)
        if code is not None:  # a file artifact store (or the temporary folder MLflow stages in) is full
            raise DiskFull(full_line("tracking", "the logged model", _written_folder(exc), code=code)) from None
        error = tracking_error(action, exc)
        text = str(error)
        raise (error if len(text) <= ERROR_LIMIT else TrackingError(text[:ERROR_LIMIT - 3] + "...")) from None


def model_bytes(model) -> int:
    """What save_pretrained writes: the parameters, plus the small files beside them."""
    return sum(p.numel() * p.element_size() for p in model.parameters()) + SMALL_FILES_BYTES


def _written_folder(exc: OSError | Exception) -> str:
    """Where a failed artifact write went: its file's folder, else the run's artifact location."""
    import mlflow

    filename = written_file(exc)
    if filename:
        return str(Path(filename).parent)
    uri = mlflow.get_artifact_uri()
    return uri.removeprefix("file://")
