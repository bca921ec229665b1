"""The benchmarks' hold on a training run: transformers' public callback API, never the product's own code.

`at_train_start(action)` runs `action(trainer)` as each transformers Trainer's `train()` starts, before its first
step, so a trial can add a TrainerCallback (`trainer.add_callback`) or take one out (`trainer.remove_callback`).
It wraps transformers' `Trainer.train`, as the truth observer does: the product's Trainer subclasses inherit it,
so it holds whatever the product builds around them. `WindowMarks` calls `mark()` at the throughput window's two
instants: the end of the last warmup step (the train's start with no warmup) and the end of training.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def at_train_start(action: Callable[[Any], None]) -> None:
    """`action(trainer)` as every transformers Trainer's `train()` starts, in this process."""
    from transformers import Trainer

    train = Trainer.train

    @functools.wraps(train)
    def starting(self, *args, **kwargs):
        action(self)
        return train(self, *args, **kwargs)

    Trainer.train = starting


def window_marks(warmup_steps: int, mark: Callable[[], None]) -> Any:
    """A TrainerCallback calling `mark()` where the throughput window opens (after `warmup_steps` steps) and
    where training ends (after the product's callbacks, which were added first)."""
    from transformers import TrainerCallback

    class WindowMarks(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.start = state.global_step
            if warmup_steps == 0:
                mark()

        def on_step_end(self, args, state, control, **kwargs):
            if warmup_steps and state.global_step - self.start == warmup_steps:
                mark()

        def on_train_end(self, args, state, control, **kwargs):
            mark()

    return WindowMarks()
