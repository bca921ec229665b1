"""The promotion rule itself (pure): no registry, no mlflow."""

import pytest

from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.promote.decision import (
    Gate,
    VersionFacts,
    check_alias,
    decide,
    decision_tags,
    description_line,
    resolve_mode,
)

FP = "c8cf8c869ecd855d"


def facts(version, value, fingerprint=FP):
    return VersionFacts(str(version), value, fingerprint)


def test_no_holder_promotes():
    decision = decide(facts(1, 0.1), None, Gate("champion", "acc", "max"))
    assert decision.promote and decision.reason == "no version holds @champion"
    tags = decision_tags(decision)
    assert tags["promotion.previous_version"] == "" and tags["promotion.holder_value"] == ""
    assert tags["promotion.promoted_at"] == decision.decided_at


@pytest.mark.parametrize("mode, candidate, holder, min_delta, promote", [
    ("max", 0.6, 0.5, 0.0, True),
    ("max", 0.5, 0.5, 0.0, False),   # a tie never moves the alias
    ("max", 0.4, 0.5, 0.0, False),
    ("max", 0.6, 0.5, 0.1, True),    # beats by exactly min_delta (float noise tolerated)
    ("max", 0.59, 0.5, 0.1, False),
    ("min", 1.5, 2.0, 0.0, True),
    ("min", 2.5, 2.0, 0.0, False),
    ("min", 1.95, 2.0, 0.1, False),
])
def test_metric_rule(mode, candidate, holder, min_delta, promote):
    decision = decide(facts(2, candidate), facts(1, holder), Gate("champion", "m", mode, min_delta))
    assert decision.promote is promote, decision.reason
    assert f"vs {holder:.6g} of version 1" in decision.reason


def test_different_or_unknown_eval_data_is_not_compared():
    refused = decide(facts(2, 0.9, "aaaa"), facts(1, 0.1, "bbbb"), Gate("champion", "acc", "max"))
    assert not refused.promote and "eval data differ (version 2: aaaa, version 1: bbbb)" in refused.reason
    unknown = decide(facts(2, 0.9, None), facts(1, 0.1), Gate("champion", "acc", "max"))
    assert not unknown.promote and "version 2 has no dataset.eval_fingerprint tag" in unknown.reason
    allowed = decide(facts(2, 0.9, "aaaa"), facts(1, 0.1, "bbbb"),
                     Gate("champion", "acc", "max", allow_different_data=True))
    assert allowed.promote


def test_same_version_changes_nothing():
    decision = decide(facts(3, 0.5), facts(3, 0.5), Gate("champion", "acc", "max"))
    assert not decision.promote and decision.changes_nothing


def test_record_and_description_line():
    decision = decide(facts(2, 0.5), facts(1, 0.25), Gate("prod", "acc", "max"))
    tags = decision_tags(decision)
    assert tags["promotion.decision"] == "promoted" and tags["promotion.alias"] == "prod"
    assert (tags["promotion.candidate_value"], tags["promotion.holder_value"]) == ("0.5", "0.25")
    line = description_line(decision)
    assert line.startswith(f"- {decision.decided_at} version 2 promoted to @prod: acc 0.5 vs 0.25")
    assert "\n" not in line


@pytest.mark.parametrize("metric, mode", [("eval_loss", "min"), ("train_loss", "min"),
                                          ("eval_caption_match_accuracy", "max"), ("eval_recall_at_1", "max")])
def test_auto_mode(metric, mode):
    assert resolve_mode(metric, "auto") == mode
    assert resolve_mode(metric, "max") == "max"


@pytest.mark.parametrize("alias", ["latest", "LATEST", "v1", "V12", ""])
def test_reserved_aliases(alias):
    with pytest.raises(ConfigError, match="reserved by MLflow"):
        check_alias(alias)
    assert check_alias("v1-candidate") == "v1-candidate"
