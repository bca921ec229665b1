"""Published pairs across batch sizes (the blog's first version: Gaudi2 b40 vs A100 b32) and its corrected rows."""

from bridgetower_mlflow.compare.analysis.headline import build_headline
from bridgetower_mlflow.compare.analysis.published_pairs import build_published_pairs, setting_text
from bridgetower_mlflow.compare.analysis.speedups import build_sections
from bridgetower_mlflow.compare.references.published import (
    ALL_CAVEATS,
    BLOG_V1_SOURCE,
    OWN_LARGEST_BATCH_SOURCES,
    extra_numbers,
    reference_records,
)

from tests.fakes.synthetic_runs import TrainRunSpec

# The study's own ratios (Gaudi2 b40 / A100 b32), each Gaudi2 row against the A100 row it was compared with.
STUDY_PAIRS = {"w0 decode=cpu ddp": (2.53, True), "w1 decode=cpu ddp": (2.16, True),
               "w1 decode=cpu fast_ddp": (2.38, False), "w1 decode=device fast_ddp": (2.70, False)}
CAPTION = "published pair, each device at its own largest batch: gaudi2 b40 vs a100 b32"


def test_first_blog_version_gives_the_a100_numbers_the_studys_ratios_imply():
    first = [n for n in extra_numbers() if n.source == BLOG_V1_SOURCE]
    assert sorted(n.value for n in first if n.accelerator == "a100") == [210.5, 296.6]
    assert {n.memory_gb for n in first if n.accelerator == "gaudi2"} == {83.39}
    assert {n.memory_gb for n in first if n.accelerator == "a100"} == {None}  # the A100 card gives none
    caveats = " ".join(ALL_CAVEATS[BLOG_V1_SOURCE])
    assert "3.15" not in caveats and "254.7" not in caveats
    assert all(ratio in caveats for ratio in ("x2.53", "x2.16", "x2.38", "x2.70"))


def test_published_pairs_give_the_studys_ratios_each_device_at_its_largest_batch():
    sections = build_sections(reference_records("all"), None)
    assert not any(p.section.source == BLOG_V1_SOURCE for p in build_headline(sections))  # 40 vs 32: no headline
    (pair,) = build_published_pairs(sections, OWN_LARGEST_BATCH_SOURCES)
    assert pair.caption == CAPTION and pair.source == BLOG_V1_SOURCE
    found = {setting_text(row.cells.gaudi): (round(row.cells.speedup, 2), row.matched) for row in pair.rows}
    assert found == STUDY_PAIRS
    assert {setting_text(row.cells.gpu) for row in pair.rows if not row.matched} == {"w1 decode=cpu ddp"}
    a100 = next(s for s in sections if s.source == BLOG_V1_SOURCE and "a100" in s.columns)
    gain = next(r for r in a100.setting_rows if r.setting.label == "w1 decode=cpu").vs_baseline_setting["a100"]
    assert round(gain, 2) == 1.41
    assert build_published_pairs(sections, frozenset()) == []  # only sources that say so are paired


def test_measured_runs_are_never_paired_across_batch_sizes():
    from types import SimpleNamespace

    from bridgetower_mlflow.compare.read.train_runs import record_from_run

    from tests.fakes.synthetic_runs import train_run_contents

    records = []
    for accel, batch, value in (("gaudi2", 40, 532.4), ("a100", 32, 210.5)):
        params, tags, metrics = train_run_contents(TrainRunSpec(accel, value, batch=batch))
        info = SimpleNamespace(run_id=accel, run_name=accel, experiment_id="1", status="FINISHED")
        records.append(record_from_run(SimpleNamespace(info=info, data=SimpleNamespace(
            params=params, tags=tags, metrics=metrics))))
    sections = build_sections(records, None)
    assert build_headline(sections) == []
    assert build_published_pairs(sections, OWN_LARGEST_BATCH_SOURCES | {"measured"}) == []
