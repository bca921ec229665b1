"""Which runs a compare looks at: experiments, filters, and the nothing-matched error."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...contract import PARENT_RUN_TAG
from ...environment import experiment_from_environment
from ...errors import ConfigError, NoMatchingRuns
from .train_runs import FetchedRuns, accelerators_found, combine_filters

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


@dataclass(frozen=True)
class CompareScope:
    """Resolved experiments (id -> name) and the extra filter string."""

    experiments: dict[str, str]  # id -> name
    filter_string: str

    @property
    def experiment_ids(self) -> list[str]:
        return list(self.experiments)

    def describe(self) -> list[str]:
        return [f"{name} ({exp_id})" for exp_id, name in self.experiments.items()]


def parent_filter(parent_run_id: str) -> str:
    return f"tags.`{PARENT_RUN_TAG}` = '{parent_run_id}'" if parent_run_id else ""


def _split(values: Iterable[str] | None) -> list[str]:
    items: list[str] = []
    for value in values or ():
        items += [part.strip() for part in str(value).split(",") if part.strip()]
    return items


def resolve_scope(client: MlflowClient, experiment_names: Iterable[str] = (), experiment_ids: Iterable[str] = (),
                  filter_string: str = "", parent_run_id: str = "") -> CompareScope:
    """Experiments by name/id, else the parent's, else `mlflow run`'s, else every active one."""
    experiments: dict[str, str] = {}
    for name in experiment_names or ():
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            known = ", ".join(sorted(e.name for e in client.search_experiments())) or "none"
            raise ConfigError("experiment_name", name, f"existing experiments: {known}")
        experiments[experiment.experiment_id] = experiment.name
    for exp_id in _split(experiment_ids):
        experiments[exp_id] = _experiment_name(client, exp_id)
    if not experiments:
        experiments = _default_experiments(client, parent_run_id)
    return CompareScope(experiments, combine_filters(filter_string, parent_filter(parent_run_id)))


def _experiment_name(client: MlflowClient, exp_id: str) -> str:
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_experiment(exp_id).name)
    except MlflowException:
        raise ConfigError("experiment_id", exp_id, "allowed: the id of an existing experiment") from None


def _parent_experiment(client: MlflowClient, parent_run_id: str) -> str:
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_run(parent_run_id).info.experiment_id)
    except MlflowException:
        raise ConfigError("parent_run_id", parent_run_id, "allowed: the id of a run in this tracking store (a "
                                                          "sweep's parent run)") from None


def _default_experiments(client: MlflowClient, parent_run_id: str) -> dict[str, str]:
    if parent_run_id:
        exp_id = _parent_experiment(client, parent_run_id)
        return {exp_id: _experiment_name(client, exp_id)}
    env_name, env_id = experiment_from_environment()
    if env_id:
        return {env_id: _experiment_name(client, env_id)}
    if env_name:
        return {e.experiment_id: e.name for e in [client.get_experiment_by_name(env_name)] if e}
    return {e.experiment_id: e.name for e in client.search_experiments()}


def nothing_matched(client: MlflowClient, scope: CompareScope, fetched: FetchedRuns) -> NoMatchingRuns:
    """The one-line error: where we looked, the filter, and which accelerators do have runs."""
    accelerators = accelerators_found(client, scope.experiment_ids) if scope.experiment_ids else []
    left = ", ".join(f"{n} {status}" for status, n in sorted(fetched.left_out.items()))
    message = (
        f"no finished train runs match in experiments {', '.join(scope.describe()) or 'none'}"
        + (f" with filter {scope.filter_string!r}" if scope.filter_string else "")
        + f"; train runs there are on accelerators: {', '.join(accelerators) or 'none'}"
        + (f"; left out: {left}" if left else "")
    )
    return NoMatchingRuns(message)
