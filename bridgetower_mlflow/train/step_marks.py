"""The points of each training step, marked from inside the Trainer: where the input enters (and is ready on
the device), where forward ends, where backward ends (the step's end is the step-timing callback's); and the spans
of the Trainer's evaluations and checkpoint saves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..accelerators.base import BACKWARD_END, FORWARD_END, INPUT_END, INPUT_START

if TYPE_CHECKING:
    from ..telemetry.steps.step_timing import StepTimingCallback
    from ..telemetry.steps.trainer_meter import TrainerMeter


def with_step_marks(base: type[Any]) -> type[Any]:
    """`base` (the project's Trainer subclass) marking each training step's points on `step_timing`."""

    class StepMarks(base):
        step_timing: StepTimingCallback | None  # the Trainer's constructor sets it (train.trainer)
        _timed: StepTimingCallback | None = None  # inside a training step: its points are marked
        _hooked = False  # the all-reduce timing is registered on the wrapped model

        def training_step(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            timing = self.step_timing
            if timing is None:
                return super().training_step(model, inputs, *args, **kwargs)
            if not self._hooked:  # the first step: the model is wrapped (DDP) by now
                self._hooked = True
                timing.hook_all_reduce(model)
            self._timed = timing
            try:
                loss = super().training_step(model, inputs, *args, **kwargs)
            finally:
                self._timed = None
            timing.mark(BACKWARD_END)
            return loss

        def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            out = super().compute_loss(model, inputs, *args, **kwargs)
            if self._timed is not None:  # not in evaluation's prediction_step
                self._timed.mark(FORWARD_END)
            return out

        def _prepare_inputs(self, inputs: Any) -> Any:
            timed = self._timed
            if timed is not None:
                timed.mark(INPUT_START)
                timed.add_samples(rows(inputs))
            inputs = super()._prepare_inputs(inputs)
            if timed is not None:
                timed.mark(INPUT_END)
            return inputs

    StepMarks.__name__ = StepMarks.__qualname__ = base.__name__
    return StepMarks


def with_timed_pauses(base: type[Any]) -> type[Any]:
    """`base` timing its own evaluations and checkpoint saves on its `meter` (the window's eval and save seconds):
    what other callbacks do beside them is neither."""

    class TimedPauses(base):
        meter: TrainerMeter | None  # the Trainer's constructor sets it (train.trainer)

        def evaluate(self, *args: Any, **kwargs: Any) -> Any:
            if self.meter is None:
                return super().evaluate(*args, **kwargs)
            with self.meter.evaluations.timing():
                return super().evaluate(*args, **kwargs)

        def _save_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
            if self.meter is None:
                return super()._save_checkpoint(*args, **kwargs)
            with self.meter.saves.timing():
                return super()._save_checkpoint(*args, **kwargs)

    TimedPauses.__name__ = TimedPauses.__qualname__ = base.__name__
    return TimedPauses


def rows(inputs: Any) -> int:
    """The rows of a batch (its first tensor's first dimension)."""
    for value in inputs.values():
        if hasattr(value, "shape") and len(value.shape):
            return int(value.shape[0])
    return 0
