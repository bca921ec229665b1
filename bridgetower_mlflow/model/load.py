"""BridgeTowerForContrastiveLearning: random-init presets built from configs, or from_pretrained."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from ..data.cpu_images import CLIP_MEAN, CLIP_STD, ImageSpec
from ..data.sample import default_sample_dir, describe_os_error, text_corpus
from ..errors import ConfigError, DataError
from ..redact import first_line

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.models.bridgetower import (
        BridgeTowerImageProcessor,
        BridgeTowerImageProcessorPil,
        BridgeTowerVisionConfig,
    )

LOGIT_SCALE_INIT = 2.6592
log = logging.getLogger(__name__)


class Preset(TypedDict):
    hidden: int
    text_layers: int
    vision_layers: int
    cross_layers: int
    heads: int
    intermediate: int
    patch: int
    image_size: int
    contrastive: int
    vocab: int | None  # None: the preset tokenizer's size


# Tower sizes of the real checkpoints; `large` is BridgeTower/bridgetower-large-itm-mlm-itc (~866M).
PRESETS = {
    "tiny": Preset(hidden=64, text_layers=2, vision_layers=2, cross_layers=2, heads=2, intermediate=128,
                   patch=16, image_size=64, contrastive=32, vocab=None),
    "base": Preset(hidden=768, text_layers=12, vision_layers=12, cross_layers=6, heads=12, intermediate=3072,
                   patch=16, image_size=288, contrastive=512, vocab=50265),
    "large": Preset(hidden=1024, text_layers=24, vision_layers=24, cross_layers=6, heads=16, intermediate=4096,
                    patch=14, image_size=294, contrastive=512, vocab=50265),
}


@dataclass
class LoadedModel:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    image_processor: object
    image: ImageSpec
    source: str  # preset:<name> or the Hub id / path


def preset_tokenizer(cache_dir: Path | None = None):
    """A byte-level BPE (RoBERTa layout) trained on the sample set's sentences, cached on disk."""
    from transformers import AutoTokenizer

    folder = Path(cache_dir or default_sample_dir().parent / "tokenizer-v2")
    try:
        _build_tokenizer(folder)
    except OSError as exc:
        raise DataError(f"model: cannot write the preset tokenizer into '{folder}' ({describe_os_error(exc)}); "
                        "allowed: a writable cache folder (BRIDGETOWER_MLFLOW_CACHE)") from None
    return AutoTokenizer.from_pretrained(str(folder))


def _build_tokenizer(folder: Path) -> None:
    """Trained once on the sample sentences and renamed into place, so a half-written folder is never read."""
    import inspect
    import json
    import tempfile

    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    if not (folder / "tokenizer_config.json").exists():
        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(text_corpus(), vocab_size=1000, min_frequency=1, show_progress=False,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        with tempfile.TemporaryDirectory() as raw:
            vocab_file, merges_file = bpe.save_model(raw)
            if "vocab" in inspect.signature(RobertaTokenizerFast.__init__).parameters:  # transformers 5.x
                merges = [tuple(line.split()) for line in Path(merges_file).read_text().splitlines()[1:] if line]
                # transformers annotates merges as list[str], but hands them to tokenizers' BPE, which takes pairs
                tokenizer = RobertaTokenizerFast(vocab=json.loads(Path(vocab_file).read_text()),
                                                 merges=merges)  # type: ignore[arg-type]
            else:
                tokenizer = RobertaTokenizerFast(vocab_file=vocab_file, merges_file=merges_file)
            folder.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=folder.parent))
            tokenizer.save_pretrained(str(staging))
            if not folder.exists():
                staging.rename(folder)


def preset_config(name: str, vocab_size: int, max_seq_length: int):
    from transformers import BridgeTowerConfig

    p = PRESETS[name]
    text = dict(vocab_size=p["vocab"] or vocab_size, hidden_size=p["hidden"], num_hidden_layers=p["text_layers"],
                num_attention_heads=p["heads"], intermediate_size=p["intermediate"],
                max_position_embeddings=max(514, max_seq_length + 2))
    vision = dict(hidden_size=p["hidden"], num_hidden_layers=p["vision_layers"], patch_size=p["patch"],
                  image_size=p["image_size"])
    config = BridgeTowerConfig(text_config=text, vision_config=vision, hidden_size=p["hidden"],
                               num_attention_heads=p["heads"], num_hidden_layers=p["cross_layers"])
    # transformers 5.x has no defaults for these two; the checkpoint carries them as extra keys.
    config.contrastive_hidden_size = p["contrastive"]
    config.logit_scale_init_value = LOGIT_SCALE_INIT
    return config


def preset_image_processor(image_size: int, mean=CLIP_MEAN, std=CLIP_STD):
    processor_class: type[BridgeTowerImageProcessorPil] | type[BridgeTowerImageProcessor]
    try:  # transformers 5.x: the PIL processor has its own name (the default one needs torchvision)
        from transformers.models.bridgetower import BridgeTowerImageProcessorPil as processor_class
    except ImportError:  # 4.55 (optimum-habana's line): the default processor is the PIL one
        from transformers.models.bridgetower import BridgeTowerImageProcessor as processor_class

    return processor_class(size={"shortest_edge": image_size}, crop_size={"shortest_edge": image_size},
                                        image_mean=list(mean), image_std=list(std))


def load_model(name: str, max_seq_length: int, seed: int) -> LoadedModel:
    """A preset (random init, seeded) or a pretrained checkpoint with its processor."""
    import torch
    from transformers import BridgeTowerForContrastiveLearning

    if name in PRESETS:
        tokenizer = preset_tokenizer()
        config = preset_config(name, len(tokenizer), max_seq_length)
        torch.manual_seed(seed)
        model = BridgeTowerForContrastiveLearning(config)
        size = config.vision_config.image_size
        return LoadedModel(model, tokenizer, preset_image_processor(size), ImageSpec(size), f"preset:{name}")
    return _load_pretrained(name)


def _load_pretrained(name: str) -> LoadedModel:
    from transformers import AutoImageProcessor, AutoTokenizer, BridgeTowerForContrastiveLearning

    try:
        model = BridgeTowerForContrastiveLearning.from_pretrained(name)
        tokenizer = AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ConfigError("model", name,
                          f"allowed: tiny, base, large, a Hub id or a local checkpoint ({first_line(exc)})") from None
    try:
        processor = AutoImageProcessor.from_pretrained(name)
        mean, std = tuple(processor.image_mean), tuple(processor.image_std)
    except (OSError, ValueError):
        log.warning("no image processor with %s; using CLIP mean/std", name)
        mean, std = CLIP_MEAN, CLIP_STD
        processor = None
    # the config typed it dict | config | None; loaded, it is a BridgeTowerVisionConfig with one square size
    vision = cast("BridgeTowerVisionConfig", model.config.vision_config)
    size = cast(int, vision.image_size)
    processor = processor or preset_image_processor(size, mean, std)
    return LoadedModel(model, tokenizer, processor, ImageSpec(size, mean, std), name)


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
