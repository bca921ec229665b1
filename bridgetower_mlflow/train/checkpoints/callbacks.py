"""Around each checkpoint: room checked before it is written, a marker after all its files, the upload queued.

A TrainerCallback: Trainer calls on_step_end (and on_log, when the step logs) before it saves, and on_save after
the checkpoint's last file. Only the process that saves (args.should_save) checks and marks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...disk_space import ensure_room, writing
from .output_folder import CHECKPOINT_ADVICE
from .resume import resume_hint
from .wholeness import PREFIX, checkpoint_bytes, latest_whole, write_marker

if TYPE_CHECKING:
    from ...config import TrainConfig
    from ...telemetry.sinks import MetricSink

# trainer_state.json, scheduler, RNG states and training args: tens of kB; the estimate leaves room for them
SMALL_FILES_BYTES = 256 << 10


def first_checkpoint_bytes(model: Any, optimizer: Any) -> int:
    """What the first checkpoint will take: the model's parameters and the optimizer's state, plus small files."""
    params = sum(p.numel() * p.element_size() for p in model.parameters()) if model is not None else 0
    state = getattr(optimizer, "state", {}) if optimizer is not None else {}
    moments = sum(v.numel() * v.element_size() for per_param in state.values() for v in per_param.values()
                  if hasattr(v, "numel"))
    return int(params + moments + SMALL_FILES_BYTES)


def room_needed(run_folder: Path, model: Any, optimizer: Any) -> tuple[int, str]:
    """(bytes, why): the last whole checkpoint's size, or the estimate before the first."""
    previous = latest_whole(run_folder)
    if previous is not None:
        return checkpoint_bytes(previous), f"the size of {previous.name}"
    return first_checkpoint_bytes(model, optimizer), "the model's parameters and optimizer state"


def checkpoint_callbacks(config: TrainConfig, sink: MetricSink) -> list[Any]:
    """The callbacks build_trainer adds: the room check and marker, and the upload when checkpoint_upload."""
    from transformers import TrainerCallback

    from ...tracking.metric_buffer import MetricBuffer
    from .upload import uploader_for

    buffer = sink if isinstance(sink, MetricBuffer) and config.checkpoint_upload else None  # rank 0's run only

    class CheckpointKeeper(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                        **kwargs: Any) -> None:
            if control.should_save and not control.should_log:  # else on_log checks, after the step's loss
                self._check_room(args, state, model, optimizer)

        def on_log(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                   **kwargs: Any) -> None:
            if control.should_save:
                self._check_room(args, state, model, optimizer)

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not args.should_save:
                return
            folder = Path(args.output_dir) / f"{PREFIX}{state.global_step}"
            with writing("output_dir", f"{folder.name}'s completion marker", folder, self._advice(args)):
                write_marker(folder, state.global_step)
            if buffer is not None:
                uploader_for(buffer.client, buffer.run_id, Path(args.output_dir)).submit(folder)

        def _check_room(self, args: Any, state: Any, model: Any, optimizer: Any) -> None:
            if not args.should_save:
                return
            run_folder = Path(args.output_dir)
            needed, why = room_needed(run_folder, model, optimizer)
            ensure_room("output_dir", f"{PREFIX}{state.global_step}", run_folder, needed, self._advice(args), why)

        def _advice(self, args: Any) -> str:
            has_one = latest_whole(Path(args.output_dir)) is not None  # else the hint says to train it again
            return f"{CHECKPOINT_ADVICE}{', then ' if has_one else '; '}{resume_hint(config, has_one)}"

    return [CheckpointKeeper()]

