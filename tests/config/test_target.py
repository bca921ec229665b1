"""The quality target's spelling: what train and sweep accept, how it is written back, what is refused."""

import pytest

from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.target import parse_target, quality_target


@pytest.mark.parametrize(("given", "canonical"), [
    ("eval_recall_at_5>=0.20", "eval_recall_at_5>=0.2"),
    ("recall_at_5 >= .2", "eval_recall_at_5>=0.2"),  # the eval_ prefix may be left out, spaces too
    ("eval_loss<1.5", "eval_loss<1.5"),
    ("'eval_recall_at_1>0.05'", "eval_recall_at_1>0.05"),  # as MLflow's Kubernetes backend quotes it
    ("  ", ""),
])
def test_a_target_is_written_back_one_way(given, canonical):
    assert quality_target("target", given) == canonical
    assert parse_target(canonical) == parse_target(given)


def test_reached_and_better_follow_the_direction():
    recall, loss = parse_target("eval_recall_at_5>=0.2"), parse_target("eval_loss<1.5")
    assert recall.reached(0.2) and not recall.reached(0.19) and not recall.reached(float("nan"))
    assert loss.reached(1.4) and not loss.reached(1.5)
    assert recall.better(0.3, 0.2) and loss.better(1.0, 1.2) and recall.better(0.1, None)
    assert not loss.better(float("nan"), 2.0)


@pytest.mark.parametrize("given", ["eval_recall_at_5=0.2", "eval_recall_at_5>=", "eval_f1>=0.2", "eval_loss>=1",
                                   "eval_recall_at_5<=0.5", "eval_recall_at_5>=1.5", "eval_loss<=-1",
                                   "eval_loss<=inf", "eval_loss<=1 and eval_recall_at_5>=0.2"])
def test_a_bad_target_names_the_field(given):
    with pytest.raises(ConfigError) as refused:
        parse_target(given)
    assert str(refused.value).startswith("target: invalid value ")
