"""Throughput maths: one rule on every accelerator, global over ranks, no figure from warmup alone."""

import pytest

from bridgetower_mlflow.contract import input_bound_label
from bridgetower_mlflow.telemetry.steps.throughput import RankThroughput, combine_ranks

pytestmark = pytest.mark.gaudi_stack


def test_global_throughput_sums_ranks_over_the_slowest_window():
    ranks = [RankThroughput(steps=10, samples=480, seconds=4.0, wait_seconds=0.4, total_seconds=6,
                            total_wait_seconds=1),
             RankThroughput(steps=10, samples=480, seconds=5.0, wait_seconds=1.5, total_seconds=7,
                            total_wait_seconds=2)]
    figures = combine_ranks(ranks)
    assert figures["train_samples_per_second"] == pytest.approx(960 / 5.0)
    assert figures["train_samples_per_second_per_device"] == pytest.approx(96.0)
    assert figures["dataloader_wait_fraction"] == pytest.approx(0.3)  # the most input-bound rank


def test_no_measured_step_gives_no_throughput_but_a_wait():
    ranks = [RankThroughput(steps=0, samples=0, seconds=0.0, wait_seconds=0.0, total_seconds=2, total_wait_seconds=1)]
    assert combine_ranks(ranks) == {"dataloader_wait_fraction": 0.5, "dataloader_wait_fraction_all_steps": 0.5}


def test_the_window_reports_its_rows_and_the_evaluations_and_saves_of_the_slowest_rank():
    ranks = [RankThroughput(steps=4, samples=100, seconds=4.0, wait_seconds=0.0, total_seconds=6, total_wait_seconds=0,
                            eval_seconds=0.5, save_seconds=0.25),
             RankThroughput(steps=4, samples=92, seconds=5.0, wait_seconds=0.0, total_seconds=7, total_wait_seconds=0,
                            eval_seconds=0.75, save_seconds=0.5)]
    figures = combine_ranks(ranks)
    assert figures["train_measured_samples"] == 192
    assert (figures["train_window_eval_seconds"], figures["train_window_save_seconds"]) == (0.75, 0.5)


@pytest.mark.parametrize("fraction,label", [(0.0, "no"), (0.049, "no"), (0.05, "moderate"), (0.199, "moderate"),
                                            (0.2, "high"), (0.9, "high")])
def test_input_bound_bands(fraction, label):
    assert input_bound_label(fraction) == label


class _Sink:
    def __init__(self):
        self.logged = []

    def log_metric(self, key, value, step):
        self.logged.append((key, value, step))


def _drive(warmup: int, steps: int, start: int = 0):
    """The callback as the Trainer calls it: train begin, one on_step_end per optimizer step, train end."""
    from types import SimpleNamespace

    from bridgetower_mlflow.telemetry.steps.throughput import ThroughputCallback

    callback = ThroughputCallback(_Sink(), None, samples_per_step=8, warmup_steps=warmup, logging_steps=5)
    state = SimpleNamespace(global_step=start)
    callback.on_train_begin(None, state, None)
    for step in range(start + 1, start + steps + 1):
        state.global_step = step
        callback.on_step_end(None, state, None)
    callback.on_train_end(None, state, None)
    return callback.result(per_rank_samples_per_step=8)


@pytest.mark.parametrize("warmup, start", [(0, 0), (0, 20), (3, 0), (3, 20)])
def test_every_step_past_the_warmup_is_measured_warmup_zero_included(warmup, start):
    """GaudiTrainingArguments' own default is throughput_warmup_steps=0: the window then opens at train begin."""
    result = _drive(warmup, steps=10, start=start)
    assert (result.steps, result.samples) == (10 - warmup, (10 - warmup) * 8)
    assert result.seconds > 0 and combine_ranks([result])["train_samples_per_second"] > 0


# --- samples counted as executed, against a real Trainer -----------------------------------------------------------
# A model the Trainer trains in milliseconds, counting the rows each training forward receives: the truth the
# throughput callback's sample count is held to (the Trainer's state and the batch size are not consulted).


def _counting_model():
    import torch

    class CountingModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.rows_seen: list[int] = []

        def forward(self, input_ids, pixel_values, attention_mask=None, return_loss=True):
            if self.training:
                self.rows_seen.append(int(input_ids.shape[0]))
            return {"loss": self.layer(pixel_values.flatten(1)[:, :4]).pow(2).mean()}

    return CountingModel()


def _rows(count: int):
    import torch

    return [{"input_ids": torch.ones(3, dtype=torch.long), "attention_mask": torch.ones(3, dtype=torch.long),
             "pixel_values": torch.rand(3, 2, 2)} for _ in range(count)]


def _train_counted(tmp_path, rows: int, batch: int, accumulation: int, max_steps: int, warmup: int,
                   drop_last: bool = True, stop_at: int = 0, resume: bool = False, workers: int = 0, kept=None):
    """(the callback's result, rows each training forward received in order, batches each optimizer step ran)."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from bridgetower_mlflow.telemetry.steps.throughput import ThroughputCallback
    from bridgetower_mlflow.telemetry.steps.trainer_meter import TrainerMeter
    from bridgetower_mlflow.train.trainer import build_trainer_class

    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=batch,
                             gradient_accumulation_steps=accumulation, max_steps=max_steps, use_cpu=True,
                             dataloader_drop_last=drop_last, report_to="none", save_strategy="steps",
                             save_steps=stop_at or 1000, logging_steps=1000, disable_tqdm=True, ignore_data_skip=True,
                             dataloader_num_workers=workers)
    model, per_step = _counting_model(), []

    class Steps(TrainerCallback):  # the batches each optimizer step ran, from the model's own count
        def on_step_end(self, args, state, control, **kwargs):
            per_step.append(len(model.rows_seen) - sum(per_step))
            if state.global_step == stop_at:
                control.should_training_stop = True

    meter = TrainerMeter()
    callback = ThroughputCallback(_Sink(), meter, samples_per_step=batch * accumulation, warmup_steps=warmup,
                                  logging_steps=1000)
    if kept is not None:
        kept.append(callback)
    trainer = build_trainer_class(Trainer)(model=model, args=args, train_dataset=_rows(rows),
                                           callbacks=[callback, Steps()], meter=meter)
    trainer.train(resume_from_checkpoint=True if resume else None)
    return callback.result(batch * accumulation), model.rows_seen, per_step


def test_gradient_accumulation_remainder_counts_the_batches_that_ran(tmp_path):
    """The issue's case: 240 rows, batch 48, GA 2, 6 steps, no warmup: each epoch's last update gets one batch,
    so 10 batches (480 rows) ran, not 6 x 96 = 576."""
    result, seen, steps = _train_counted(tmp_path, rows=240, batch=48, accumulation=2, max_steps=6, warmup=0)
    assert (steps, seen) == ([2, 2, 1, 2, 2, 1], [48] * 10)
    assert (result.steps, result.samples) == (6, 480)


def test_warmup_leaves_out_the_batches_of_its_steps_only(tmp_path):
    """Warmup 2 of the same run: steps 1-2 carried 4 batches; the window's 4 steps carried the other 6."""
    result, seen, _ = _train_counted(tmp_path, rows=240, batch=48, accumulation=2, max_steps=6, warmup=2)
    assert sum(seen) == 480 and (result.steps, result.samples) == (4, 480 - 4 * 48)


def test_a_smaller_last_batch_counts_its_own_rows_where_drop_last_is_off(tmp_path):
    """240 rows in batches of 50 without drop_last: 50, 50, 50, 50 and a last batch of 40 per epoch."""
    result, seen, _ = _train_counted(tmp_path, rows=240, batch=50, accumulation=1, max_steps=6, warmup=0,
                                     drop_last=False)
    assert seen == [50, 50, 50, 50, 40, 50]
    assert (result.steps, result.samples) == (6, 290)


def test_a_resume_runs_each_step_with_the_batches_the_uninterrupted_run_had(tmp_path):
    """5 batches an epoch in steps of 2 (2, 2, 1): stopped at step 4 and resumed, the run goes on 2, 1, 2, 2. The
    loader skips the trained batches itself and says how many the resumed epoch has left, so the Trainer ends
    that epoch's update on its last batch instead of carrying it into the next epoch's first step."""
    _, _, whole = _train_counted(tmp_path / "whole", rows=240, batch=48, accumulation=2, max_steps=8, warmup=0)
    _, _, first = _train_counted(tmp_path / "cut", rows=240, batch=48, accumulation=2, max_steps=8, warmup=0,
                                 stop_at=4)
    result, _, rest = _train_counted(tmp_path / "cut", rows=240, batch=48, accumulation=2, max_steps=8, warmup=0,
                                     resume=True)
    assert (whole, first) == ([2, 2, 1] * 2 + [2, 2], [2, 2, 1, 2])
    assert rest == whole[4:] and result.samples == 48 * sum(rest)


def test_the_window_ends_after_the_train_loader_let_its_workers_go(tmp_path, monkeypatch):
    """Stopped mid-epoch, the train loader still holds its workers when training ends: transformers 5.x lets them
    go when its epoch function returns, 4.x and GaudiTrainer only after on_train_end. The window closes after they
    are gone on every stack (one rule), so its seconds do not depend on which Trainer ran."""
    import time

    import torch.utils.data.dataloader as dataloader

    released = []
    shutdown = dataloader._MultiProcessingDataLoaderIter._shutdown_workers

    def recorded(self):
        if not getattr(self, "_shutdown", True):
            released.append(time.perf_counter())
        shutdown(self)

    monkeypatch.setattr(dataloader._MultiProcessingDataLoaderIter, "_shutdown_workers", recorded)
    kept = []
    _train_counted(tmp_path, rows=240, batch=8, accumulation=1, max_steps=3, warmup=0, workers=1, kept=kept)
    assert len(released) == 1 and released[0] <= kept[0].t_end


def test_the_wait_includes_the_fetch_that_finds_the_epoch_over():
    """The last `next()` of an epoch blocks too (a multi-process loader joins its workers before it raises
    StopIteration): the step loop waits on it, so the wait counts it."""
    import time

    import torch

    from bridgetower_mlflow.telemetry.steps.loader_wait import TimedLoader

    class EndsSlowly:
        def __iter__(self):
            yield {"input_ids": torch.zeros(2, 1)}
            time.sleep(0.2)  # what shutting the workers down costs, at least

    loader = TimedLoader(EndsSlowly(), 1)
    assert len(list(loader)) == 1
    assert loader.wait_seconds >= 0.2 and loader.delivered.samples == 2


def test_evaluations_and_saves_in_the_window_are_the_trainers_own_calls(tmp_path, monkeypatch):
    """What other callbacks do around an evaluation or a save (the metric queue persisted before a checkpoint,
    a printer) is not the evaluation's nor the save's: each figure is the span of the Trainer's own call, timed
    here around `evaluate` and `_save_checkpoint` of transformers' Trainer (the product's subclass not touched)."""
    import time

    from transformers import Trainer, TrainerCallback, TrainingArguments

    from bridgetower_mlflow.telemetry.steps.throughput import ThroughputCallback
    from bridgetower_mlflow.telemetry.steps.trainer_meter import TrainerMeter
    from bridgetower_mlflow.train.trainer import build_trainer_class

    spans = {"evaluate": [], "_save_checkpoint": []}
    for name, found in spans.items():
        original = getattr(Trainer, name)

        def timed(self, *args, _original=original, _found=found, **kwargs):
            started = time.perf_counter()
            try:
                return _original(self, *args, **kwargs)
            finally:
                _found.append(time.perf_counter() - started)

        monkeypatch.setattr(Trainer, name, timed)

    class SlowAroundSaves(TrainerCallback):  # after the throughput callback, as the project's persist-on-save is
        def on_log(self, args, state, control, logs=None, **kwargs):
            if control.should_save:
                time.sleep(0.4)

        def on_save(self, args, state, control, **kwargs):
            time.sleep(0.4)

    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, max_steps=4,
                             use_cpu=True, report_to="none", save_strategy="steps", save_steps=2, logging_steps=2,
                             eval_strategy="steps", eval_steps=2, disable_tqdm=True, prediction_loss_only=True)
    meter = TrainerMeter()
    callback = ThroughputCallback(_Sink(), meter, samples_per_step=8, warmup_steps=0, logging_steps=2)
    trainer = build_trainer_class(Trainer)(model=_counting_model(), args=args, train_dataset=_rows(64),
                                           eval_dataset=_rows(16), callbacks=[callback, SlowAroundSaves()],
                                           meter=meter)
    trainer.train()
    result = callback.result(8)
    assert len(spans["evaluate"]) == 2 and len(spans["_save_checkpoint"]) == 2
    observed = {"eval": sum(spans["evaluate"]), "save": sum(spans["_save_checkpoint"])}
    reported = {"eval": result.eval_seconds, "save": result.save_seconds}
    for figure in observed:
        assert abs(reported[figure] - observed[figure]) <= 0.05 + 0.05 * observed[figure], \
            f"{figure} seconds: reported {reported[figure]:.3f}, the Trainer's own calls took {observed[figure]:.3f}"
