"""A resumed run continues exactly where its checkpoint left off, on the CPU loader and on a device loader.

The real trainer (tiny preset) trains to a checkpoint and stops; a second trainer resumes from it.
The device loader is the nvJPEG loader with its GPU decode done by Pillow (the decode is not what
is tested: the plan, the skip and the Trainer's resume path are).
"""

from __future__ import annotations

import dataclasses

import pytest
from transformers import TrainerCallback

from bridgetower_mlflow.accelerators.cuda import nvjpeg
from bridgetower_mlflow.accelerators.registry import get_accelerator
from bridgetower_mlflow.config import build_train_config
from bridgetower_mlflow.launch.ranks import RankInfo
from bridgetower_mlflow.telemetry.sinks import NullSink
from bridgetower_mlflow.train.prepare import prepare
from bridgetower_mlflow.train.trainer import build_trainer

pytestmark = pytest.mark.gaudi_stack

STEPS, BATCH = 8, 8


class Record(TrainerCallback):
    """The token ids of every row each step trained on (what the loader fed), and a stop point."""

    def __init__(self, stop_at=None):
        self.steps, self.stop_at, self.seen = {}, stop_at, []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps[state.global_step] = self.seen[-1]
        if self.stop_at and state.global_step == self.stop_at:
            control.should_training_stop = True


def _run(tmp_path, device_decode: bool, resume: bool, stop_at=None, record=None, **options) -> dict:
    config = build_train_config(model="tiny", max_steps=STEPS, save_steps=options.pop("save_steps", 3), logging_steps=1,
                                per_device_train_batch_size=BATCH, dataloader_num_workers=0,
                                throughput_warmup_steps=1, log_model=False, output_dir=str(tmp_path), **options)
    adapter = get_accelerator("cpu")
    prepared = prepare(config, adapter, adapter.detect(1, 1), RankInfo(0, 0, 1))
    prepared.args.output_dir = str(tmp_path / "run")
    if device_decode:
        from tests.fakes.requests import decode_request

        request = decode_request(prepared.data.train, batch_size=BATCH, image_size=prepared.loaded.image.size)
        prepared = dataclasses.replace(prepared, device_loader=nvjpeg.build_nvjpeg_loader(request, "cpu"))
    trainer, _ = build_trainer(config, prepared, NullSink())
    record = record or Record(stop_at)
    original = trainer.training_step

    def training_step(model, inputs, *args, **kwargs):
        record.seen.append([tuple(row) for row in inputs["input_ids"].tolist()])  # which rows
        return original(model, inputs, *args, **kwargs)

    trainer.training_step = training_step
    trainer.add_callback(record)
    trainer.train(resume_from_checkpoint=True if resume else None)
    return record.steps


@pytest.mark.parametrize("device_decode", [False, True], ids=["cpu-loader", "device-loader"])
def test_resume_continues_with_the_batches_an_uninterrupted_run_had(tmp_path, cache_dir, monkeypatch, device_decode):
    monkeypatch.setattr(nvjpeg, "check_nvjpeg_ready", lambda device: None)
    monkeypatch.setattr(nvjpeg, "decode_on_gpu", lambda jpegs, device: nvjpeg_cpu(jpegs))
    whole = _run(tmp_path / "whole", device_decode, resume=False)
    first = _run(tmp_path / "cut", device_decode, resume=False, stop_at=3)
    rest = _run(tmp_path / "cut", device_decode, resume=True)
    assert sorted(first) == [1, 2, 3] and sorted(rest) == list(range(4, STEPS + 1))
    assert {**first, **rest} == whole


@pytest.mark.parametrize("device_decode", [False, True], ids=["cpu-loader", "device-loader"])
def test_resume_with_gradient_accumulation_and_a_remainder(tmp_path, cache_dir, monkeypatch, device_decode):
    """5 batches an epoch in steps of 2: the Trainer counts ceil(5/2) = 3 steps an epoch, the last of one batch.

    Stopped after step 4 (7 batches: one epoch of 5, then 2), the resumed run is fed the epoch's last 3
    batches and then the next epoch from its start, as the uninterrupted run was.
    """
    monkeypatch.setattr(nvjpeg, "check_nvjpeg_ready", lambda device: None)
    monkeypatch.setattr(nvjpeg, "decode_on_gpu", lambda jpegs, device: nvjpeg_cpu(jpegs))
    options = dict(max_train_samples=5 * BATCH, hf_args=("--gradient_accumulation_steps", "2"), save_steps=4)
    whole, cut = Record(), Record(stop_at=4)
    _run(tmp_path / "whole", device_decode, resume=False, record=whole, **options)
    _run(tmp_path / "cut", device_decode, resume=False, record=cut, **options)
    rest = Record()
    _run(tmp_path / "cut", device_decode, resume=True, record=rest, **options)
    assert len(cut.seen) == 7 and cut.seen == whole.seen[:7]
    assert rest.seen[:7] == whole.seen[7:14]


def nvjpeg_cpu(jpegs):
    import io

    import numpy as np
    import torch
    from PIL import Image

    return [torch.from_numpy(np.asarray(Image.open(io.BytesIO(j.numpy().tobytes())).convert("RGB"))
                             .transpose(2, 0, 1).copy()) for j in jpegs]
