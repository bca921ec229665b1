"""`bridgetower-mlflow promote` against a real sqlite registry holding real tiny models."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.cli import main

from tests.promote.conftest import BETTER, WORSE, register, registry_snapshot, unique_name


def promote(*args):
    return CliRunner().invoke(main, ["promote", *args])


def champion(name: str, alias: str = "champion"):
    from mlflow.tracking import MlflowClient

    return MlflowClient().get_registered_model(name).aliases.get(alias)


def tags(name: str, version: str) -> dict:
    from mlflow.tracking import MlflowClient

    return MlflowClient().get_model_version(name, version).tags


@pytest.fixture
def two_versions(store):
    """v1 from the worse run holds @champion; v2 (better) is the latest, unpromoted."""
    name = unique_name()
    register(name, store.worse)
    register(name, store.better)
    result = promote("--model-name", name, "--candidate", "1")
    assert result.exit_code == 0, result.output
    return name


def test_first_version_takes_the_free_alias(store):
    name = unique_name()
    register(name, store.worse)
    result = promote("--model-name", name)
    assert result.exit_code == 0, result.output
    assert "promoted" in result.stdout and "no version holds @champion" in result.stdout
    assert champion(name) == 1
    recorded = tags(name, "1")
    assert recorded["promotion.decision"] == "promoted"
    assert recorded["promotion.previous_version"] == ""
    assert recorded["promotion.promoted_at"] == recorded["promotion.decided_at"] != ""


def test_better_candidate_moves_the_alias_and_is_recorded(two_versions):
    from mlflow.tracking import MlflowClient

    result = promote("--model-name", two_versions)  # candidate defaults to latest (v2)
    assert result.exit_code == 0, result.output
    assert f"{two_versions} version 2 now holds @champion (was version 1)" in result.stdout
    assert champion(two_versions) == 2
    recorded = tags(two_versions, "2")
    assert recorded["promotion.decision"] == "promoted"
    assert recorded["promotion.previous_version"] == "1"
    assert recorded["promotion.metric"] == "eval_caption_match_accuracy"
    assert float(recorded["promotion.candidate_value"]) == BETTER["eval_caption_match_accuracy"]
    assert float(recorded["promotion.holder_value"]) == WORSE["eval_caption_match_accuracy"]
    assert "better by 0.25" in recorded["promotion.reason"]
    lines = MlflowClient().get_registered_model(two_versions).description.splitlines()
    assert len(lines) == 2
    assert "version 1 promoted to @champion" in lines[0]
    assert "version 2 promoted to @champion" in lines[1] and "better by 0.25" in lines[1]


def test_worse_candidate_leaves_the_alias_and_says_why(store):
    name = unique_name()
    register(name, store.better)
    register(name, store.worse)
    assert promote("--model-name", name, "--candidate", "1").exit_code == 0
    result = promote("--model-name", name, "--candidate", "latest")
    assert result.exit_code == 0, result.output
    assert "not promoted" in result.stdout and "@champion stays on version 1" in result.stdout
    assert "eval_caption_match_accuracy 0.25 vs 0.5" in result.stdout
    assert champion(name) == 1
    assert tags(name, "2")["promotion.decision"] == "not_promoted"
    assert tags(name, "2")["promotion.promoted_at"] == ""
    assert "version 2 not promoted to @champion" in registry_snapshot(name)["description"]

    gated = promote("--model-name", name, "--candidate", "2", "--fail-if-not-promoted")
    assert gated.exit_code == 1
    assert gated.stderr.startswith("error: not promoted:") and len(gated.stderr.splitlines()) == 1
    assert champion(name) == 1


def test_min_delta_and_mode(two_versions):
    result = promote("--model-name", two_versions, "--min-delta", "0.3")
    assert result.exit_code == 0 and "better by only 0.25" in result.stdout
    assert champion(two_versions) == 1
    # eval_loss: auto mode knows lower is better (2.0 -> 1.5)
    result = promote("--model-name", two_versions, "--metric", "eval_loss")
    assert result.exit_code == 0 and "lower is better" in result.stdout
    assert champion(two_versions) == 2
    # an explicit mode wins: under max, v1's higher loss (2.0) beats v2's 1.5
    result = promote("--model-name", two_versions, "--candidate", "1", "--metric", "eval_loss", "--mode", "max")
    assert result.exit_code == 0 and "higher is better" in result.stdout
    assert champion(two_versions) == 1


def test_equal_metric_does_not_promote(store):
    name = unique_name()
    register(name, store.worse)
    register(name, store.worse)
    promote("--model-name", name, "--candidate", "1")
    result = promote("--model-name", name, "--candidate", "2", "--fail-if-not-promoted", "true")
    assert result.exit_code == 1 and "not better" in result.stderr
    assert champion(name) == 1


def test_dry_run_changes_nothing(two_versions):
    before = registry_snapshot(two_versions)
    result = promote("--model-name", two_versions, "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"dry run, nothing changed: would promote {two_versions} version 2 to @champion (was version 1): ")
    refused = promote("--model-name", two_versions, "--dry-run", "true", "--min-delta", "0.5",
                      "--fail-if-not-promoted")
    assert refused.exit_code == 1
    assert refused.stderr.startswith(f"error: dry run, nothing changed: would not promote {two_versions} version 2")
    assert registry_snapshot(two_versions) == before


def test_different_eval_data_is_not_compared(store):
    name = unique_name()
    register(name, store.worse)
    register(name, store.better, dataset__eval_fingerprint="0123456789abcdef")
    promote("--model-name", name, "--candidate", "1")
    result = promote("--model-name", name)
    assert result.exit_code == 0 and "eval data differ" in result.stdout
    assert "metrics not compared" in result.stdout
    assert champion(name) == 1 and tags(name, "2")["promotion.decision"] == "not_promoted"
    allowed = promote("--model-name", name, "--allow-different-data")
    assert allowed.exit_code == 0 and "now holds @champion" in allowed.stdout
    assert champion(name) == 2


def test_fingerprint_missing_on_the_version_is_read_from_its_run(store):
    name = unique_name()
    register(name, store.worse)
    register(name, store.better, dataset__eval_fingerprint=None)
    promote("--model-name", name, "--candidate", "1")
    assert "now holds" in promote("--model-name", name).stdout


def test_candidate_by_alias_and_metric_from_the_source_run(two_versions):
    from mlflow.tracking import MlflowClient

    MlflowClient().set_registered_model_alias(two_versions, "challenger", "2")
    MlflowClient().delete_model_version_tag(two_versions, "2", "eval_recall_at_1")
    result = promote("--model-name", two_versions, "--candidate", "challenger", "--metric", "eval_recall_at_1")
    assert result.exit_code == 0, result.output
    assert "0.2 vs 0.1" in result.stdout  # v2's value came from its run's metric
    assert champion(two_versions) == 2


def test_candidate_already_holding_the_alias_is_a_no_op(two_versions):
    before = registry_snapshot(two_versions)
    result = promote("--model-name", two_versions, "--candidate", "1", "--fail-if-not-promoted")
    assert result.exit_code == 0 and "already holds @champion" in result.stdout
    assert registry_snapshot(two_versions) == before


@pytest.mark.parametrize("args, message", [
    (["--model-name", "no-such-model"], "error: model-name: no registered model 'no-such-model'; allowed: "),
    (["--candidate", "7"], "error: candidate: registered model '{name}' has no version '7'; allowed: a version (1, 2)"),
    (["--candidate", "staging"], "error: candidate: registered model '{name}' has no alias 'staging'; allowed: "),
    (["--metric", "eval_bleu"], "error: metric: version 2 (candidate) of '{name}' has no 'eval_bleu'; allowed: "),
    (["--alias", "latest"], "error: alias: invalid value 'latest'; allowed: any name except 'latest' and v<digits>"),
    (["--alias", "v3"], "error: alias: invalid value 'v3'; allowed: "),
    (["--dry-run", "maybe"], "error: dry_run: invalid value 'maybe'; allowed: true or false"),
])
def test_errors_are_one_line_exit_2_and_change_nothing(two_versions, args, message):
    before = registry_snapshot(two_versions)
    result = promote("--model-name", two_versions, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(message.format(name=two_versions)), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert registry_snapshot(two_versions) == before


def test_holder_without_the_metric_is_an_error(store):
    name = unique_name()
    register(name, store.worse)
    register(name, store.better, eval_custom="0.9")
    promote("--model-name", name, "--candidate", "1")
    before = registry_snapshot(name)
    result = promote("--model-name", name, "--metric", "eval_custom")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: metric: version 1 (holder of @champion) of '{name}' has no 'eval_custom'")
    assert registry_snapshot(name) == before
