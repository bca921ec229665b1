"""Deterministic sample set in the New Yorker `matching` schema (imagefolder layout).

Each split folder holds JPEG line drawings and a metadata.jsonl whose `image_description` names what
is drawn where, so image-text retrieval can really be learned.
"""

from __future__ import annotations

import errno
import fcntl
import json
import random
import shutil
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw

from ..environment import cache_folder
from ..redact import first_line
from .sample_drawings import DRAWINGS

SAMPLE_VERSION = "v2"
DEFAULT_SPLIT_SIZES = {"train": 240, "validation": 48, "test": 48}
PLACES = ("on the left", "in the middle", "on the right")
LOCATIONS = ("a living room", "an office", "a desert island", "a city street", "a bar", "a park")
CAPTION_TEMPLATES = (
    "I told you the {a} would follow us home.",
    "Honestly, the {a} was here before the {b}.",
    "Don't look now, but the {a} is listening.",
    "We said no {a} on weekends.",
    "It's not the {a} I'm worried about, it's the {b}.",
)
LABELS = "ABCDE"


def default_sample_dir() -> Path:
    return cache_folder() / f"sample-{SAMPLE_VERSION}"


def text_corpus() -> list[str]:
    """Every sentence shape the sample set uses (tokenizer training for the presets)."""
    names = sorted(DRAWINGS)
    lines = [f"A cartoon in {loc} of a {n} {p}." for loc in LOCATIONS for n in names for p in PLACES]
    lines += [t.format(a=a, b=b) for t in CAPTION_TEMPLATES for a in names for b in names if a != b]
    lines.append(", ".join(names) + " and " + " with " + " next to " + " there is nothing unusual here.")
    return lines


def _describe(location: str, objects: list[str]) -> str:
    parts = [f"a {name} {PLACES[slot]}" for slot, name in enumerate(objects) if name]
    listed = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    return f"A cartoon in {location} of {listed}."


def _draw(rng: random.Random, objects: list[str]) -> Image.Image:
    width, height = rng.randint(600, 1000), rng.randint(600, 1000)
    image = Image.new("RGB", (width, height), (250, 248, 240))
    draw = ImageDraw.Draw(image)
    line = rng.randint(12, 18)  # thick enough to survive the tiny preset's 64 px
    draw.rectangle((8, 8, width - 9, height - 9), outline="black", width=line)
    for _ in range(rng.randint(40, 90)):  # pen hatching: texture like a real cartoon's shading
        x, y = rng.randint(10, width - 40), rng.randint(height // 2, height - 20)
        draw.line((x, y, x + rng.randint(8, 30), y - rng.randint(2, 12)), fill=(90, 90, 90), width=1)
    slot_w = (width - 40) / 3
    for slot, name in enumerate(objects):
        if not name:
            continue
        x0 = 20 + slot * slot_w + rng.uniform(0, slot_w * 0.1)
        y0 = rng.uniform(height * 0.1, height * 0.3)
        DRAWINGS[name](draw, (x0, y0, x0 + slot_w * 0.85, y0 + height * 0.55), line)
    return image


def _row(rng: random.Random, index: int, split: str) -> tuple[dict, list[str]]:
    names = sorted(DRAWINGS)
    objects = rng.sample(names, 3)
    if rng.random() < 0.3:
        objects[rng.randrange(3)] = ""
    present = [o for o in objects if o]
    absent = [n for n in names if n not in present]
    correct = rng.choice(CAPTION_TEMPLATES).format(a=rng.choice(present), b=rng.choice(absent))
    distractors = [rng.choice(CAPTION_TEMPLATES).format(a=a, b=rng.choice([x for x in absent if x != a]))
                   for a in rng.sample(absent, 4)]
    label = rng.randrange(5)
    choices = distractors[:label] + [correct] + distractors[label:]
    location = rng.choice(LOCATIONS)
    row = {
        "contest_number": index // 5 + 1,
        "image_location": location,
        "image_description": _describe(location, objects),
        "image_uncanny_description": f"The {present[0]} seems out of place in {location}.",
        "entities": present,
        "questions": [f"Why is there a {present[0]}?"],
        "caption_choices": choices,
        "from_description": "",
        "label": LABELS[label],
        "n_tokens_label": len(correct.split()),
        "instance_id": f"{split}-{index:05d}",
    }
    return row, objects


def write_split(folder: Path, split: str, size: int, seed: int) -> None:
    """Write `size` JPEGs and their metadata.jsonl into folder/split."""
    out = folder / split
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{seed}-{split}")
    with open(out / "metadata.jsonl", "w", encoding="utf-8") as meta:
        for index in range(size):
            row, objects = _row(rng, index, split)
            file_name = f"{index:05d}.jpg"
            _draw(rng, objects).save(out / file_name, format="JPEG", quality=90)
            meta.write(json.dumps({"file_name": file_name, **row}) + "\n")


def generate_sample_set(folder: Path | None = None, sizes: dict | None = None, seed: int = 0,
                        force: bool = False) -> Path:
    """Create the sample set once (atomic, safe under concurrent ranks and sweeps); return its folder.

    Without `sizes`, any complete set there is used (e.g. a bigger one made by `sample-data`); with
    `sizes` or `seed` different from the existing set's, it is made again.
    """
    folder = Path(folder) if folder else default_sample_dir()
    marker = folder / "COMPLETE"

    def usable() -> bool:
        if force or not marker.exists():
            return False
        made = json.loads(marker.read_text())
        return sizes is None or (made.get("sizes") == sizes and made.get("seed") == seed)

    if usable():
        return folder
    sizes = sizes or DEFAULT_SPLIT_SIZES
    _check_replaceable(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if usable():
            return folder
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        staging.chmod(0o755)
        for split, size in sizes.items():
            write_split(staging, split, size, seed)
        (staging / "COMPLETE").write_text(json.dumps({"version": SAMPLE_VERSION, "sizes": sizes, "seed": seed}))
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    return folder


def _check_replaceable(folder: Path) -> None:
    """Only an absent or empty folder, or a sample set, is (re)made: anything else there is someone's."""
    existing = next(path for path in (folder, *folder.absolute().parents) if path.exists())
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder", str(existing))
    if existing == folder and not (folder / "COMPLETE").exists() and any(folder.iterdir()):
        raise FileExistsError(errno.EEXIST, "holds files that are not a sample set", str(folder))


def describe_os_error(exc: OSError) -> str:
    """'<file>: <reason>' of a failed write, in one line."""
    reason = exc.strerror or first_line(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason
