"""The whole `train` flow on one screen: config -> adapter -> device -> prepared parts -> tracked result."""

from __future__ import annotations

import os

from ..accelerators.detection import hide_if_broken
from ..accelerators.registry import get_accelerator
from ..launch.ranks import RankInfo, needs_launch
from .output_folder import check_writable
from .prepare import prepare
from .result import TrainResult
from .run import fit_and_record, launch_tracked


def train(config, *, tracked: bool = True) -> TrainResult:
    """One fine-tuning run (or, with devices > 1 and no outer launcher, the launcher of its ranks).

    `tracked=False` trains exactly as a non-main rank does: no run, nothing logged, no samplers.
    """
    ranks = RankInfo.from_env()
    check_writable(config.output_dir)
    adapter = get_accelerator(config.accel)
    for key, value in adapter.stack_environment(config.hf_args).items():  # before anything imports torch
        os.environ.setdefault(key, value)
    hide_if_broken("torchvision")  # transformers imports it when present: a broken one must not break runs
    launcher = needs_launch(config.devices, ranks)
    device = adapter.detect(ranks.devices_here(config.devices), ranks.job_size(config.devices), launcher)
    if launcher:
        return launch_tracked(config, adapter, device)
    for key, value in ranks.torch_env().items():  # mpirun sets only its own names; torch.distributed reads these
        os.environ.setdefault(key, value)
    prepared = prepare(config, adapter, device, ranks)
    return fit_and_record(config, prepared, ranks, tracked)
