"""What the Trainer iterates for training: host-side fetches timed, already-trained batches skipped on a resume.

The same rule on every loader: the data-loader wait is the time the step loop blocks on the host side
of the input pipeline (the CPU loader's worker queue, the nvJPEG loader's byte reader, the media
pipeline's queue); device copies and on-device decode are the device's work, not the loader's. The rows
counted are those of the batches handed to the Trainer (what its steps run: a gradient-accumulation
remainder and a smaller last batch included, a resume's skipped batches and a read-ahead left out). On a
resume the first epoch starts after the batches the checkpoint already trained (Trainer's own skip is
off: accelerate rebuilds the loader for it, which would drop the timing and any device decode).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..telemetry.steps.loader_wait import BatchCount, TimedLoader
from ..telemetry.steps.trainer_meter import TrainerMeter


class ResumingLoader:
    """Wraps an accelerate DataLoaderShard or a device loader; forwards everything else to it."""

    def __init__(self, loader: Any, trainer: Any, length: int | None = None, meter: TrainerMeter | None = None) -> None:
        self._loader, self._trainer = loader, trainer  # the trainer's state is replaced when it loads a checkpoint
        self._length = length if length is not None else len(loader)
        self._resume_checked = False
        self.delivered = BatchCount()
        self.timed = self._time_host_side(loader, self.delivered)
        if meter is not None:  # the throughput callback reads this loader's figures through it
            meter.attach(self.timed)

    @staticmethod
    def _time_host_side(loader: Any, delivered: BatchCount) -> TimedLoader:
        """Put the timer where the host waits: the shard's base loader, or the device loader's host reader."""
        if hasattr(loader, "host_loader"):
            timed = TimedLoader(loader.host_loader, delivered=delivered)
            loader.host_loader = timed
            return timed
        timed = TimedLoader(loader.base_dataloader, delivered=delivered)
        loader.base_dataloader = timed
        return timed

    def __len__(self) -> int:
        """Batches the next pass yields: a resumed epoch's are what its checkpoint left. The Trainer sizes each
        epoch from this once its checkpoint's step is loaded (transformers 4.x, GaudiTrainer), and ends the
        epoch's last gradient-accumulation update on that epoch's last batch."""
        return self._length - self._pending_skip()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def batches_to_skip(self) -> int:
        """On the first epoch of a resumed run: the batches of that epoch the checkpoint already trained."""
        skip = self._pending_skip()
        self._resume_checked = True
        return skip

    def _pending_skip(self) -> int:
        if self._resume_checked:
            return 0
        accumulation = max(1, int(self._trainer.args.gradient_accumulation_steps))
        steps_per_epoch = max(-(-self._length // accumulation), 1)  # ceil, as both Trainers count an epoch
        return (int(self._trainer.state.global_step) % steps_per_epoch) * accumulation

    def __iter__(self) -> Iterator[Any]:
        skip = self.batches_to_skip()
        if skip and hasattr(self._loader, "skip_batches_once"):
            self._loader.skip_batches_once(skip)  # a device loader skips in its plan, reading nothing
            skip = 0
        for index, batch in enumerate(self._loader):
            if index >= skip:
                self.delivered.add(batch)
                yield batch
