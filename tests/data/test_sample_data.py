"""The generated sample set: deterministic, the `matching` schema, descriptions of what is drawn."""

import json

from PIL import Image

from bridgetower_mlflow.data.sample import generate_sample_set
from bridgetower_mlflow.data.sample_drawings import DRAWINGS


def test_sample_set_is_deterministic_and_in_matching_schema(tmp_path):
    sizes = {"train": 6, "validation": 3, "test": 2}
    first = generate_sample_set(tmp_path / "a", sizes)
    second = generate_sample_set(tmp_path / "b", sizes)
    for split, size in sizes.items():
        rows = [json.loads(line) for line in (first / split / "metadata.jsonl").read_text().splitlines()]
        assert len(rows) == size
        for row in rows:
            assert {"file_name", "image_description", "caption_choices", "label", "contest_number",
                    "image_location", "entities", "instance_id"} <= set(row)
            assert len(row["caption_choices"]) == 5 and row["label"] in "ABCDE"
            assert (first / split / row["file_name"]).read_bytes() == (second / split / row["file_name"]).read_bytes()


def test_images_are_contest_sized_jpegs_and_descriptions_name_the_drawn_objects(tmp_path):
    folder = generate_sample_set(tmp_path / "s", {"train": 8, "validation": 2, "test": 1})
    for line in (folder / "train" / "metadata.jsonl").read_text().splitlines():
        row = json.loads(line)
        with Image.open(folder / "train" / row["file_name"]) as image:
            assert image.format == "JPEG" and all(600 <= side <= 1000 for side in image.size)
        named = [name for name in DRAWINGS if f"a {name} " in row["image_description"]]
        assert sorted(named) == sorted(row["entities"])
        correct = row["caption_choices"]["ABCDE".index(row["label"])]
        assert any(entity in correct for entity in row["entities"])


def test_loads_through_datasets_like_a_hub_set(cache_dir):
    import datasets

    from bridgetower_mlflow.data.sample import default_sample_dir

    splits = datasets.load_dataset("imagefolder", data_dir=str(default_sample_dir()))
    assert set(splits) == {"train", "validation", "test"}
    assert {"image", "image_description", "caption_choices", "label"} <= set(splits["train"].column_names)


def test_sizes_decide_when_the_set_is_made_again(tmp_path):
    folder = generate_sample_set(tmp_path / "s", {"train": 4, "validation": 2, "test": 1})
    assert generate_sample_set(folder) == folder  # no sizes: whatever complete set is there
    assert len((folder / "train" / "metadata.jsonl").read_text().splitlines()) == 4
    generate_sample_set(folder, {"train": 6, "validation": 2, "test": 1})
    assert len((folder / "train" / "metadata.jsonl").read_text().splitlines()) == 6
