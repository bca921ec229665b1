"""The sweep's distribution_strategy, per_device_train_batch_size and devices axes: parsing, planning, names."""

import pytest

from bridgetower_mlflow.accelerators.installed import package_version
from bridgetower_mlflow.accelerators.registry import get_accelerator
from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.sweep.child import start_line
from bridgetower_mlflow.sweep.flow import SweepOptions, adapter_strategies, cell_devices, plan_sweep
from bridgetower_mlflow.sweep.grid import (
    Capabilities,
    SweepAxes,
    parse_batches,
    parse_devices,
    parse_strategies,
    plan_cells,
)
from bridgetower_mlflow.sweep.limits import check_cells_can_measure, option_value

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
    axes = SweepAxes([0, 1], [False], 2, ("ddp", "fast_ddp"), (4, 8), (2,))
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
    assert args[args.index("--devices") + 1] == "2"
    assert args[args.index("--run-name") + 1] == "gaudi2 w0 decode=cpu fast_ddp b4 r1"
    assert len({cell.setting for cell in plan.cells}) == 8  # the child's sweep.cell tag tells cells apart


def test_fast_ddp_on_one_device_is_plain_ddp_so_that_duplicate_cell_is_skipped_with_a_note():
    plan = plan_cells("gaudi2", SweepAxes([0], [False], 2, ("ddp", "fast_ddp"), devices=(1, 2)), GAUDI)
    assert [c.run_name for c in plan.cells] == [
        "gaudi2 w0 decode=cpu ddp d1 r1", "gaudi2 w0 decode=cpu ddp d2 r1", "gaudi2 w0 decode=cpu fast_ddp d2 r1",
        "gaudi2 w0 decode=cpu ddp d1 r2", "gaudi2 w0 decode=cpu ddp d2 r2", "gaudi2 w0 decode=cpu fast_ddp d2 r2"]
    assert plan.notes == [
        "skipped distribution_strategy=fast_ddp at devices=1 on gaudi2: one device has no gradient all-reduce, so "
        "fast_ddp runs as plain ddp there and the ddp cell already measures it (2 cells not run, not faked)"]
    default = plan_cells("gaudi2", SweepAxes([0, 1], [False], 1, ("ddp", "fast_ddp")), GAUDI)  # train's 1 device
    assert [c.run_name for c in default.cells] == ["gaudi2 w0 decode=cpu ddp r1", "gaudi2 w1 decode=cpu ddp r1"]
    assert "(2 cells not run, not faked)" in default.notes[0]
    alone = plan_cells("gaudi2", SweepAxes([0], [False], 1, ("fast_ddp",)), GAUDI)  # asked alone: not a duplicate
    assert [c.run_name for c in alone.cells] == ["gaudi2 w0 decode=cpu r1"] and not alone.notes


def test_the_native_hpu_path_has_no_fast_ddp_so_the_sweep_skips_it(monkeypatch):
    monkeypatch.setenv("BRIDGETOWER_GAUDI_PATH", "native")  # plain Trainer on hpu, as without optimum-habana
    assert adapter_strategies(get_accelerator("gaudi3")) == ("ddp",)
    plan = plan_sweep(SweepOptions(accel="gaudi2", workers="0", device_decode="false",
                                   distribution_strategy="ddp,fast_ddp", repeats=1, devices="2"))
    assert [c.run_name for c in plan.cells] == ["gaudi2 w0 decode=cpu ddp r1"]
    assert plan.notes == ["skipped distribution_strategy=fast_ddp on gaudi2: the gaudi2 adapter has no fast_ddp "
                          "(1 cells not run, not faked)"]


@pytest.mark.skipif(package_version("optimum-habana") is None, reason="optimum-habana is not installed here "
                    "(the Gaudi stack's venv runs this: make test-gaudi)")
def test_optimum_habana_gives_gaudi_fast_ddp(monkeypatch):
    monkeypatch.delenv("BRIDGETOWER_GAUDI_PATH", raising=False)
    assert adapter_strategies(get_accelerator("gaudi3")) == ("ddp", "fast_ddp")


def test_devices_axis_names_its_cells_and_skips_counts_the_host_lacks():
    assert parse_devices(" 1,2, 4,2") == (1, 2, 4) and parse_devices("") == parse_devices(None) == (None,)
    with pytest.raises(ConfigError, match="devices: invalid value '0'; allowed: a whole number >= 1"):
        parse_devices("1,0")
    two = Capabilities(device_decode=False, max_devices=2, devices_limit="2 NVIDIA GPU(s) visible here")
    plan = plan_cells("h100", SweepAxes([0], [False], 1, batches=(8, 16), devices=(1, 2, 4, 8)), two)
    assert [c.run_name for c in plan.cells] == ["h100 w0 decode=cpu d1 b8 r1", "h100 w0 decode=cpu d1 b16 r1",
                                                "h100 w0 decode=cpu d2 b8 r1", "h100 w0 decode=cpu d2 b16 r1"]
    assert plan.notes == ["skipped devices=4,8 on h100: 2 NVIDIA GPU(s) visible here (4 cells not run, not faked)"]
    with pytest.raises(ConfigError, match=r"devices: invalid value '4,8'; allowed on h100: 1..2"):
        plan_cells("h100", SweepAxes([0], [False], 1, devices=(4, 8)), two)
    assert cell_devices(plan) == 2  # a Ray cell holds the largest cell's devices


def test_on_cpu_devices_are_processes_over_the_hosts_cores_and_the_sweep_says_so(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    plan = plan_sweep(SweepOptions(accel="cpu", workers="0", device_decode="false", repeats=1, devices="1,2,4"))
    assert [c.run_name for c in plan.cells] == ["cpu w0 decode=cpu d1 r1", "cpu w0 decode=cpu d2 r1"]
    assert plan.notes == [
        "skipped devices=4 on cpu: a cpu device is a process over this host's cores, 2 here (1 cells not run, not "
        "faked)",
        "devices on cpu are processes (torchrun ranks) sharing this host's 2 cores: the curve is the host's "
        "scaling, not that of separate devices"]


@pytest.mark.parametrize(("args", "message"), [
    (["--max-steps", "3", "--throughput-warmup-steps", "3"],
     "throughput_warmup_steps: invalid value 3; allowed: fewer than max_steps=3"),
    (["--max-steps", "2"], "throughput_warmup_steps: invalid value 3; allowed: fewer than max_steps=2"),  # default 3
    (["--max_steps=5", "--throughput_warmup_steps=9"], "throughput_warmup_steps: invalid value 9"),
])
def test_a_grid_whose_cells_cannot_measure_a_step_is_refused(args, message):
    with pytest.raises(ConfigError) as caught:
        check_cells_can_measure(args)
    assert str(caught.value).startswith(message)
    check_cells_can_measure(["--max-steps", "4"])  # the default 3 warmup steps leave one
    check_cells_can_measure(["--throughput-warmup-steps", "50"])  # by epochs: known only once the data is
    assert option_value(["--devices", "2", "--devices=4"], "devices") == "4"


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
    assert adapter_strategies(get_accelerator("cpu")) == ("ddp",)
    assert adapter_strategies(get_accelerator("h100")) == ("ddp",)
    plan = plan_sweep(SweepOptions(accel="h100", workers="2", device_decode="true",
                                   distribution_strategy="ddp,fast_ddp", repeats=1))
    assert [c.run_name for c in plan.cells] == ["h100 w2 decode=device ddp r1"]
    assert "skipped distribution_strategy=fast_ddp on h100" in plan.notes[0]


def test_start_line():
    cell = plan_cells("cpu", SweepAxes([1], [False], 1, ("ddp", "fast_ddp"), (8, 16)), CPU).cells[1]
    assert start_line(3, 12, cell) == "[3/12] starting cpu w1 decode=cpu ddp b16 r1"
