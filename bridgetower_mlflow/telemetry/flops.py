"""Model FLOPs of one training sample, measured: forward + backward of the contrastive step, counted by
torch.utils.flop_counter.FlopCounterMode on the meta device (no memory, no compute), cached on disk.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from ..environment import cache_folder

log = logging.getLogger(__name__)
CACHE_VERSION = "1"


def cache_dir() -> Path:
    return cache_folder() / "flops"


def count_training_flops(model_config, image_size: int, seq_len: int, batch: int = 1) -> float:
    """FLOPs of forward + backward (loss included) for `batch` samples of this configuration."""
    import contextlib
    import copy
    from unittest import mock

    import torch
    import transformers.masking_utils as masking
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import BridgeTowerForContrastiveLearning

    config = copy.deepcopy(model_config)
    config.vision_config.image_size = image_size
    with torch.device("meta"):
        model = BridgeTowerForContrastiveLearning(config)
        pixels = torch.empty(batch, 3, image_size, image_size)
        ids = torch.zeros(batch, seq_len, dtype=torch.long)
        mask = torch.ones(batch, seq_len, dtype=torch.long)
    # Meta tensors hold no values, so 5.x's mask helper shortcut (skip the mask when it is all ones)
    # cannot look; padded captions, what training sees, take the materialized-mask path anyway. 4.55 builds
    # BridgeTower's masks with get_extended_attention_mask, which never looks at the values.
    shortcut = "_ignore_bidirectional_mask_sdpa"
    skip_check = (mock.patch.object(masking, shortcut, lambda *a, **k: False) if hasattr(masking, shortcut)
                  else contextlib.nullcontext())
    with skip_check, FlopCounterMode(display=False) as counter:
        model(pixel_values=pixels, input_ids=ids, attention_mask=mask, return_loss=True).loss.backward()
    return float(counter.get_total_flops())


def flops_per_sample(model_config, image_size: int, seq_len: int) -> float:
    """count_training_flops for one sample, computed once per configuration and kept in the cache folder."""
    import torch
    import transformers

    text = json.dumps([CACHE_VERSION, model_config.to_json_string(), image_size, seq_len, torch.__version__,
                       transformers.__version__])
    path = cache_dir() / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.json"
    if path.exists():
        return float(json.loads(path.read_text())["flops_per_sample"])
    flops = count_training_flops(model_config, image_size, seq_len)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"flops_per_sample": flops, "image_size": image_size, "seq_len": seq_len}))
    return flops
