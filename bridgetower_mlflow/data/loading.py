"""Dataset loading: the generated sample set, a local folder, or a Hub dataset (real code)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datasets import Dataset

from ..errors import DataError
from ..redact import first_line
from .cpu_images import ImageSpec, ImageTransform
from .sample import default_sample_dir, describe_os_error, generate_sample_set

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass
class PreparedData:
    """Tokenized splits with on-the-fly image decoding, plus what identifies the data."""

    train: Dataset
    validation: Dataset
    validation_rows: list[dict]  # raw text columns for caption matching
    source: str
    fingerprint: str
    eval_fingerprint: str
    image_column: str
    caption_column: str


def _load_dataset_dict(dataset: str, dataset_config: str):
    import datasets

    if dataset == "sample":
        folder = _sample_set()
        return datasets.load_dataset("imagefolder", data_dir=str(folder)), f"sample:{folder}"
    path = Path(dataset).expanduser()
    if path.exists():
        if not path.is_dir():
            raise DataError(f"dataset: '{dataset}' is not a folder; allowed: sample, a local folder or a Hub id")
        try:
            if (path / "dataset_dict.json").exists():
                return datasets.load_from_disk(str(path)), f"disk:{path.resolve()}"
            return datasets.load_dataset(str(path.resolve())), f"folder:{path.resolve()}"
        except (OSError, ValueError) as exc:  # no data files, unreadable or mixed formats: datasets says which
            raise DataError(f"dataset: cannot load folder '{dataset}': {first_line(exc)}; allowed: a folder of "
                            "images with metadata.jsonl (imagefolder), or one saved by save_to_disk") from None
    if dataset.startswith(("/", ".", "~")) or not HUB_ID.match(dataset):
        raise DataError(
            f"dataset: folder '{dataset}' does not exist; allowed: sample, an existing local folder or a Hub dataset id"
        )
    try:
        return datasets.load_dataset(dataset, dataset_config or None), f"hub:{dataset}:{dataset_config}"
    except Exception as exc:  # noqa: BLE001 - offline, missing, gated: all are user-facing data errors
        raise DataError(f"dataset: cannot load Hub dataset '{dataset}' (config {dataset_config!r}): "
                        f"{first_line(exc)}") from None


def _sample_set():
    try:
        return generate_sample_set()
    except OSError as exc:
        raise DataError(f"dataset: cannot write the sample set into '{default_sample_dir()}' ({describe_os_error(exc)})"
                        "; allowed: a writable cache folder (BRIDGETOWER_MLFLOW_CACHE)") from None


def _ensure_splits(splits, seed: int):
    """Keep a dataset's own validation split (the upstream example discarded it); else carve one."""
    if "train" not in splits:
        raise DataError(f"dataset: no 'train' split; found {sorted(splits)}")
    splits = dict(splits)  # the caller's DatasetDict stays as loaded
    if "validation" not in splits:
        if "test" in splits:
            splits["validation"] = splits["test"]
        elif len(splits["train"]) < 2:
            rows = len(splits["train"])
            raise DataError(f"dataset: the 'train' split has {rows} row{'s' * (rows != 1)} and no validation "
                            "or test split; allowed: at least 2 rows (a fifth is held out for validation), or a "
                            "validation split")
        else:
            carved = splits["train"].train_test_split(test_size=0.2, seed=seed)
            splits["train"], splits["validation"] = carved["train"], carved["test"]
    for name in ("train", "validation"):
        if len(splits[name]) == 0:
            raise DataError(f"dataset: the '{name}' split has no rows; allowed: a {name} split of at least 1 row")
    return splits


def _check_columns(split, image_column: str, caption_column: str) -> None:
    for field, column in (("image_column", image_column), ("caption_column", caption_column)):
        if column not in split.column_names:
            raise DataError(f"{field}: column '{column}' not in the dataset; allowed: {', '.join(split.column_names)}")
    dtype = getattr(split.features[caption_column], "dtype", type(split.features[caption_column]).__name__)
    if dtype not in ("string", "large_string"):
        raise DataError(f"caption_column: column '{caption_column}' holds {dtype} values; allowed: a text column")


def _fingerprint(source: str, rows: list[dict], caption_column: str) -> str:
    digest = hashlib.sha256(source.split(":")[0].encode())
    for row in rows:
        digest.update(json.dumps([row.get(caption_column), row.get("caption_choices"), row.get("label")]).encode())
    return digest.hexdigest()[:16]


def _text_rows(split, caption_column: str) -> list[dict]:
    keep = [c for c in (caption_column, "caption_choices", "label") if c in split.column_names]
    return split.select_columns(keep).to_list()


def image_transform(image_backend: str, image_column: str, image: ImageSpec) -> ImageTransform:
    """The workers' per-row transform of `image_backend`: the fast CPU path, or the study's."""
    if image_backend == "study":
        from .study_images import StudyImageTransform

        return StudyImageTransform(image_column, image)
    return ImageTransform(image_column, image.size)


def prepare_data(config, tokenizer, image: ImageSpec | int) -> PreparedData:
    """Load, split, tokenize (padded to max length) and attach the image transform of config.image_backend.

    `image` is the model's ImageSpec (a bare size: CLIP's mean and std)."""
    import datasets

    image = image if isinstance(image, ImageSpec) else ImageSpec(image)
    # a config without the field (a benchmark's namespace) gets the default path
    transform = image_transform(getattr(config, "image_backend", "fast"), config.image_column, image)

    splits, source = _load_dataset_dict(config.dataset, config.dataset_config)
    splits = _ensure_splits(splits, config.seed)
    _check_columns(splits["train"], config.image_column, config.caption_column)
    train, validation = splits["train"], splits["validation"]
    if config.max_train_samples:
        train = train.select(range(min(config.max_train_samples, len(train))))
    if config.max_eval_samples:
        validation = validation.select(range(min(config.max_eval_samples, len(validation))))
    if isinstance(train.features.get(config.image_column), datasets.Image):
        train = train.cast_column(config.image_column, datasets.Image(decode=False))
        validation = validation.cast_column(config.image_column, datasets.Image(decode=False))
    validation_rows = _text_rows(validation, config.caption_column)

    def tokenize(batch):
        return tokenizer(batch[config.caption_column], padding="max_length", truncation=True,
                         max_length=config.max_seq_length)

    keep = {config.image_column}
    prepared = []
    for split in (train, validation):
        drop = [c for c in split.column_names if c not in keep]
        split = split.map(tokenize, batched=True, remove_columns=drop, desc="tokenize")
        prepared.append(split.with_transform(transform))
    train_fp = _fingerprint(source, _text_rows(train, config.caption_column)[:2000], config.caption_column)
    return PreparedData(
        train=prepared[0], validation=prepared[1], validation_rows=validation_rows, source=source,
        fingerprint=train_fp, eval_fingerprint=_fingerprint(source, validation_rows, config.caption_column),
        image_column=config.image_column, caption_column=config.caption_column,
    )
