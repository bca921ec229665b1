"""The sweep's distribution_strategy and per_device_train_batch_size axes: parsing, planning, cell names."""

import pytest

from bridgetower_mlflow.accelerators.registry import get_accelerator
from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.sweep.child import start_line
from bridgetower_mlflow.sweep.flow import SweepOptions, adapter_strategies, plan_sweep
from bridgetower_mlflow.sweep.grid import (
    Capabilities,
    SweepAxes,
    parse_batches,
    parse_strategies,
    plan_cells,
)

CPU = Capabilities(device_decode=False, strategies=("ddp",))
GAUDI = Capabilities(device_decode=True, strategies=("ddp", "fast_ddp"))


def test_axis_values_are_parsed_and_deduplicated():
    assert parse_strategies(" ddp, FAST_DDP,ddp") == ("ddp", "fast_ddp")
    assert parse_batches("8, 4,8") == (8, 4)
    assert parse_batches("") == parse_batches(None) == parse_batches("  ") == (None,)


@pytest.mark.parametrize(("parse", "text", "message"), [
    (parse_strategies, "ddp,ring", "distribution_strategy: invalid value 'ddp,ring'; allowed: a comma-separated "
                                   "list of ddp, fast_ddp"),
    (parse_strategies, ",", "distribution_strategy: invalid value ','"),
    (parse_batches, "4,0", "per_device_train_batch_size: invalid value '0'; allowed: a whole number >= 1"),
    (parse_batches, "4,x", "per_device_train_batch_size: invalid value 'x'; allowed: a whole number"),
])
def test_bad_axis_values_name_the_field(parse, text, message):
    with pytest.raises(ConfigError) as caught:
        parse(text)
    assert str(caught.value).startswith(message)


def test_grid_is_repeat_major_over_every_axis_and_names_the_swept_ones():
    axes = SweepAxes([0, 1], [False], 2, ("ddp", "fast_ddp"), (4, 8))
    plan = plan_cells("gaudi2", axes, GAUDI)
    names = [cell.run_name for cell in plan.cells]
    assert len(names) == 16 and not plan.notes
    assert names[:5] == ["gaudi2 w0 decode=cpu ddp b4 r1", "gaudi2 w1 decode=cpu ddp b4 r1",
                         "gaudi2 w0 decode=cpu ddp b8 r1", "gaudi2 w1 decode=cpu ddp b8 r1",
                         "gaudi2 w0 decode=cpu fast_ddp b4 r1"]
    assert all(name.endswith(" r1") for name in names[:8]) and all(name.endswith(" r2") for name in names[8:])
    args = plan.cells[4].train_args()
    assert args[args.index("--distribution-strategy") + 1] == "fast_ddp"
    assert args[args.index("--per-device-train-batch-size") + 1] == "4"
    assert args[args.index("--run-name") + 1] == "gaudi2 w0 decode=cpu fast_ddp b4 r1"
    assert len({cell.setting for cell in plan.cells}) == 8  # the child's sweep.cell tag tells cells apart


def test_one_value_axes_keep_short_names_and_the_default_batch_passes_nothing():
    (cell,) = plan_cells("cpu", SweepAxes([1], [False], 1), CPU).cells
    assert cell.run_name == "cpu w1 decode=cpu r1"
    assert "--per-device-train-batch-size" not in cell.train_args()
    assert cell.train_args()[-2:] == ["--distribution-strategy", "ddp"]
    (batch,) = plan_cells("cpu", SweepAxes([1], [False], 1, batches=(16,)), CPU).cells
    assert batch.run_name == "cpu w1 decode=cpu r1" and batch.train_args()[-2:] == [
        "--per-device-train-batch-size", "16"]


def test_fast_ddp_is_skipped_with_a_note_where_the_accelerator_has_none():
    plan = plan_cells("cpu", SweepAxes([0, 1], [False, True], 1, ("ddp", "fast_ddp"), (4, 8)), CPU)
    assert [c.run_name for c in plan.cells] == [
        "cpu w0 decode=cpu ddp b4 r1", "cpu w1 decode=cpu ddp b4 r1",
        "cpu w0 decode=cpu ddp b8 r1", "cpu w1 decode=cpu ddp b8 r1"]
    assert plan.notes == [
        "skipped device_decode=true on cpu: the cpu adapter has no on-device JPEG decode (8 cells not run, not faked)",
        "skipped distribution_strategy=fast_ddp on cpu: the cpu adapter has no fast_ddp (4 cells not run, not faked)",
    ]


def test_a_grid_left_empty_is_bad_input():
    with pytest.raises(ConfigError, match="distribution_strategy: invalid value 'fast_ddp'; allowed on cpu: ddp"):
        plan_cells("cpu", SweepAxes([0], [False], 1, ("fast_ddp",)), CPU)
    with pytest.raises(ConfigError, match="device_decode: invalid value 'true'; allowed on cpu: false"):
        plan_cells("cpu", SweepAxes([0], [True], 1), CPU)


def test_fast_ddp_is_gaudi_only_as_the_adapters_decide():
    assert adapter_strategies(get_accelerator("gaudi3")) == ("ddp", "fast_ddp")
    assert adapter_strategies(get_accelerator("cpu")) == ("ddp",)
    assert adapter_strategies(get_accelerator("h100")) == ("ddp",)
    plan = plan_sweep(SweepOptions(accel="h100", workers="2", device_decode="true",
                                   distribution_strategy="ddp,fast_ddp", repeats=1))
    assert [c.run_name for c in plan.cells] == ["h100 w2 decode=device ddp r1"]
    assert "skipped distribution_strategy=fast_ddp on h100" in plan.notes[0]


def test_start_line():
    cell = plan_cells("cpu", SweepAxes([1], [False], 1, ("ddp", "fast_ddp"), (8, 16)), CPU).cells[1]
    assert start_line(3, 12, cell) == "[3/12] starting cpu w1 decode=cpu ddp b16 r1"
