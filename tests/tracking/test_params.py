"""Params: flattening, limits, secret redaction and mlflow-run equality."""

from bridgetower_mlflow.redact import REDACTED, redact_text
from bridgetower_mlflow.tracking.params import conflicts, flatten, prepare_params, same_value


def test_flatten_nested_dicts_to_dotted_keys():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": None}) == {"a.b": 1, "a.c.d": [1, 2], "e": None}


def test_long_values_are_shortened_but_kept_whole_in_full():
    loggable, full = prepare_params({"long": "x" * 7000, "k" * 300: 1})
    assert len(loggable["long"]) <= 6000 and "params_full.json" in loggable["long"]
    assert full["long"] == "x" * 7000
    assert all(len(k) <= 250 for k in loggable) and len(loggable) == 2


def test_secrets_are_redacted_by_key_and_by_value(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cr3t-pass")
    loggable, full = prepare_params({
        "hub_token": "abc", "model.text_config.pad_token_id": 1, "tokenizer_name": "roberta",
        "note": "uses hf_" + "a" * 34, "uri": "postgresql://bob:pw@db/mlflow", "free": "has s3cr3t-pass inside",
        "db_password": "x", "api_key": "y", "hub_token_unset": None,
    })
    for key in ("hub_token", "note", "uri", "free", "db_password", "api_key"):
        assert loggable[key] == REDACTED and full[key] == REDACTED
    assert loggable["model.text_config.pad_token_id"] == "1" and loggable["tokenizer_name"] == "roberta"


def test_redact_text_in_free_text(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-123456")
    assert redact_text("Authorization: Bearer abcdefghijkl and tok-123456") == "Authorization: *** and ***"


def test_mlflow_run_raw_values_equal_ours():
    assert same_value("1e-5", "1e-05") and same_value("true", "True") and same_value("5", "5.0")
    assert same_value("''", "") and same_value("'--warmup_steps 5'", "--warmup_steps 5")
    assert not same_value("1e-5", "2e-5") and not same_value("tiny", "base")


def test_conflicts_only_for_different_meaning():
    assert conflicts({"lr": "1e-5", "m": "tiny"}, {"lr": "1e-05", "m": "base", "new": "1"}) == {"m": ("tiny", "base")}


def test_a_raw_secret_logged_by_mlflow_run_is_no_conflict_and_never_shown(monkeypatch):
    # `mlflow run` logs -P values raw; train logs them redacted: the same value, not a changed one
    url = "http://bob:hunter2-pw@tracking.example:5000"
    assert conflicts({"data.url": url, "seed": "1"}, {"data.url": "***", "seed": "1"}) == {}
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue")
    clash = conflicts({"note": "uses hf_secretvalue", "seed": "1"}, {"note": "***", "seed": "2"})
    assert clash == {"seed": ("1", "2")}
    clash = conflicts({"endpoint": url}, {"endpoint": "http://other.example"})
    assert "hunter2" not in str(clash) and clash["endpoint"][0] == "***"
