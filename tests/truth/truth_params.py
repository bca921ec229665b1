"""The params are the run: every key that is both a logged param and a field of the TrainingArguments the Trainer
ran with (tests/truth/truth_observer.py records `args.to_dict()` as Trainer.train starts, outside the product) holds
that value, written by the project's own param rules (tracking/params.py); the run's name and description state
the batch and workers the Trainer ran with. Used by tests/truth/test_truth.py and tests/truth/test_truth_gaudi.py.
"""

from __future__ import annotations

from pathlib import Path

from bridgetower_mlflow.contract import NOTE_TAG, RUN_NAME_TAG
from bridgetower_mlflow.tracking.params import prepare_params


def _output_dir(param: str, record: dict, run_id: str) -> bool:
    """The Trainer runs in the run's own folder, `<asked output_dir>/<run id>`; the param is the asked folder."""
    return record["training_args"]["output_dir"] == str(Path(param) / run_id)


def _bf16(param: str, record: dict, run_id: str) -> bool:
    """GaudiTrainer moves args.bf16 into its own autocast switch (use_hpu_amp, or use_cpu_amp in its CPU mode) and
    clears the field ("not used after the __init__"): bf16 ran if either says so, and only then."""
    ran = record["training_args"]["bf16"] or any(record.get("trainer_amp", {}).values())
    return param == str(ran)


def _run_name(param: str, record: dict, run_id: str) -> bool:
    """The param is the asked MLflow run name ('' = derived from the settings). TrainingArguments' run_name only
    labels transformers' own reporting integrations (report_to is the project's, and hf_args may not set it): it
    stays transformers' default, None, or output_dir on transformers 4.x (set before the run's folder is known)."""
    ran = record["training_args"]
    return ran["run_name"] in (None, str(Path(ran["output_dir"]).parent))


def _every_n_steps(key: str, strategy: str):
    """0 means never on the project's side (eval_steps: only once, at the end; save_steps: no checkpoints), which
    TrainingArguments spells as the strategy "no" (its step count then unused: None or its default 500)."""
    def holds(param: str, record: dict, run_id: str) -> bool:
        ran = record["training_args"]
        if param == "0":
            return ran[strategy] == "no"
        return ran[strategy] == "steps" and str(ran[key]) == param

    return holds


MAPPED = {"output_dir": _output_dir, "run_name": _run_name, "bf16": _bf16,
          "eval_steps": _every_n_steps("eval_steps", "eval_strategy"),
          "save_steps": _every_n_steps("save_steps", "save_strategy")}


def params_against_the_trainer(params: dict, record: dict, run_id: str) -> list[str]:
    """One line for each logged param that says other than what the Trainer ran with (`record`: the observer's
    record of rank 0); [] when all agree."""
    ran_as_params, _full = prepare_params(record["training_args"])
    wrong = []
    for key in sorted(set(params) & set(ran_as_params)):
        agrees = MAPPED[key](params[key], record, run_id) if key in MAPPED else params[key] == ran_as_params[key]
        if not agrees:
            wrong.append(f"{key}: param {params[key][:80]!r}, the Trainer ran {ran_as_params[key][:80]!r}")
    return wrong


def name_and_description_against_the_trainer(tags: dict, ran: dict) -> list[str]:
    """What the run's name and description state about the batch and workers, against what the Trainer ran."""
    workers, batch = ran["dataloader_num_workers"], ran["per_device_train_batch_size"]
    first_line = tags.get(NOTE_TAG, "").splitlines()[0] if tags.get(NOTE_TAG) else ""
    wanted = {"run name": (f" w{workers} ", f" {tags.get(RUN_NAME_TAG, '')} "),
              "description's batch": (f" batch {batch}/device ", f" {first_line} "),
              "description's workers": (f" {workers} data-loader workers ", f" {first_line} ")}
    return [f"{what}: {shown.strip()!r} does not state {part.strip()!r}" for what, (part, shown) in wanted.items()
            if part not in shown]
