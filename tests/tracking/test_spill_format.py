"""The spill file's line format is fixed: files written by earlier versions (lines copied here byte for byte
from what they wrote) are still read and uploaded, and today's writer writes the same bytes."""

from mlflow.tracking import MlflowClient

from bridgetower_mlflow.tracking.records import MetricRecord, StatusRecord, TagsRecord, from_line, to_line
from bridgetower_mlflow.tracking.spill import upload_spill

# what the string-tagged-tuple version wrote for a metric, a set of tags and the end status
METRIC_LINE = '{"run_id": "RUN", "key": "loss", "value": 0.5, "timestamp": 1700000000000, "step": 1}\n'
TAGS_LINE = '{"run_id": "RUN", "tags": {"a": "b", "note": "x y"}}\n'
STATUS_LINE = '{"run_id": "RUN", "status": "FINISHED", "end_time": 1700000000100}\n'
OLDER_STATUS_LINE = '{"run_id": "RUN", "status": "KILLED"}\n'  # versions before end_time was written


def test_lines_written_by_earlier_versions_read_as_typed_records_and_are_written_back_byte_for_byte():
    expected = {
        METRIC_LINE: MetricRecord("loss", 0.5, 1_700_000_000_000, 1),
        TAGS_LINE: TagsRecord({"a": "b", "note": "x y"}),
        STATUS_LINE: StatusRecord("FINISHED", 1_700_000_000_100),
    }
    for line, record in expected.items():
        assert from_line(line) == ("RUN", record)
        assert to_line("RUN", record) == line
    assert from_line(OLDER_STATUS_LINE) == ("RUN", StatusRecord("KILLED", None))


def test_a_spill_file_written_by_an_earlier_version_is_uploaded(sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    spill = tmp_path / f"{run_id}.spill.jsonl"
    metrics = "".join(METRIC_LINE.replace('"step": 1', f'"step": {s}').replace("0.5", f"{s}.5") for s in range(3))
    spill.write_text((metrics + TAGS_LINE + STATUS_LINE).replace('"RUN"', f'"{run_id}"'))
    assert upload_spill(spill) == (3, {run_id})
    run = client.get_run(run_id)
    history = sorted((m.step, m.value, m.timestamp) for m in client.get_metric_history(run_id, "loss"))
    assert history == [(s, s + 0.5, 1_700_000_000_000) for s in range(3)]
    assert run.data.tags["a"] == "b" and run.data.tags["note"] == "x y"
    assert (run.info.status, run.info.end_time) == ("FINISHED", 1_700_000_000_100)
    assert not spill.exists()
