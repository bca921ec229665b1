"""The registry side of promotion: resolve versions, read their metrics, apply and record a decision."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..environment import project_run_id
from ..errors import TrackingError
from ..redact import first_line
from ..tracking.failures import registry_failure
from .decision import (
    FINGERPRINT_TAG,
    Decision,
    Gate,
    VersionFacts,
    decide,
    decision_tags,
    description_line,
    metric_value,
)
from .lock import is_lock, promotion_lock

if TYPE_CHECKING:
    from mlflow.entities import RunData
    from mlflow.entities.model_registry import RegisteredModel
    from mlflow.tracking import MlflowClient

log = logging.getLogger(__name__)


def _registered_model(client: MlflowClient, name: str) -> RegisteredModel:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_registered_model(name)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
    names = sorted(m.name for m in client.search_registered_models(max_results=20) if not is_lock(m.name))
    raise TrackingError(f"model-name: no registered model {name!r}; "
                        f"allowed: {', '.join(names) or 'none registered yet'}")


def _version_numbers(client: MlflowClient, name: str) -> list[str]:
    versions = client.search_model_versions(f"name = '{name}'")
    return [str(n) for n in sorted(int(v.version) for v in versions)]


def resolve_candidate(client: MlflowClient, model: RegisteredModel, ref: str) -> str:
    """A version number (or v<n>), `latest`, or an alias -> the version number."""
    numbers = _version_numbers(client, model.name)
    aliases = dict(model.aliases or {})
    allowed = (f"allowed: a version ({', '.join(numbers[-10:]) or 'none yet'}), latest, "
               f"or an alias ({', '.join(sorted(aliases)) or 'none set'})")
    ref = ref.strip()
    if ref.lower() == "latest":
        if numbers:
            return numbers[-1]
        raise TrackingError(f"candidate: registered model {model.name!r} has no versions yet; "
                            f"allowed: register one first (train --register-as {model.name})")
    number = ref[1:] if ref[:1] in ("v", "V") and ref[1:].isdigit() else ref
    if number.isdigit() and str(int(number)) in numbers:
        return str(int(number))
    if ref in aliases:
        return str(aliases[ref])
    kind = "version" if number.isdigit() else "alias"
    raise TrackingError(f"candidate: registered model {model.name!r} has no {kind} {ref!r}; {allowed}")


def _run_data(client: MlflowClient, run_id: str | None) -> RunData | None:
    from mlflow.exceptions import MlflowException

    if not run_id:
        return None
    try:
        return client.get_run(run_id).data
    except MlflowException:  # a deleted or unreadable source run: the version's own tags still count
        return None


def version_facts(client: MlflowClient, name: str, version: str, metric: str, role: str) -> VersionFacts:
    """The version's tag of that name (what the registry shows), else the source run's metric; fingerprint likewise."""
    model_version = client.get_model_version(name, version)
    tags = model_version.tags or {}
    run = _run_data(client, model_version.run_id or tags.get("run_id"))
    run_metrics, run_tags = (run.metrics, run.tags) if run else ({}, {})
    value = metric_value(tags.get(metric))
    if value is None:
        value = metric_value(run_metrics.get(metric))
    if value is None:
        known = sorted(set(run_metrics) | {k for k, v in tags.items() if metric_value(v) is not None})
        raise TrackingError(f"metric: version {version} ({role}) of {name!r} has no {metric!r}; "
                            f"allowed: {', '.join(known[:15]) or 'no metrics recorded on it'}")
    return VersionFacts(version, value, tags.get(FINGERPRINT_TAG) or run_tags.get(FINGERPRINT_TAG))


def apply_decision(client: MlflowClient, name: str, decision: Decision) -> None:
    """Move the alias first (if promoted), then record; a refused first write leaves the registry as it was."""
    from mlflow.exceptions import MlflowException

    if decision.promote:
        client.set_registered_model_alias(name, decision.alias, decision.candidate.version)
    try:
        for key, value in decision_tags(decision).items():
            client.set_model_version_tag(name, decision.candidate.version, key, value)
        description = (client.get_registered_model(name).description or "").rstrip("\n")
        client.update_registered_model(name, description=(description + "\n" if description else "")
                                       + description_line(decision))
    except MlflowException as exc:
        if not decision.promote:
            raise
        raise TrackingError(f"model-name: @{decision.alias} of {name!r} now points to version "
                            f"{decision.candidate.version}, but recording the decision failed ({first_line(exc)}); "
                            "allowed: a server that accepts writes (promotion.* tags or the description "
                            "line may be missing)") from None


def _tag_project_run(client: MlflowClient, decision: Decision, dry_run: bool) -> None:
    """Under `mlflow run -e promote` the decision is also visible on the project's run (best effort)."""
    from mlflow.exceptions import MlflowException

    run_id = project_run_id()
    if not run_id:
        return
    tags = {**decision_tags(decision), "promotion.candidate_version": decision.candidate.version,
            "promotion.dry_run": str(dry_run).lower()}
    try:
        for key, value in tags.items():
            client.set_tag(run_id, key, value)
    except MlflowException as exc:
        log.warning("could not tag the project run %s with the decision: %s", run_id, exc)


def _decide(client: MlflowClient, model_name: str, candidate: str, gate: Gate) -> Decision:
    """Read the candidate and the current holder of the alias, and decide."""
    model = _registered_model(client, model_name)
    candidate_version = resolve_candidate(client, model, candidate)
    facts = version_facts(client, model_name, candidate_version, gate.metric, "candidate")
    holder_version = (model.aliases or {}).get(gate.alias)
    holder = (version_facts(client, model_name, str(holder_version), gate.metric, f"holder of @{gate.alias}")
              if holder_version is not None else None)
    return decide(facts, holder, gate)


def promote(model_name: str, candidate: str, gate: Gate, dry_run: bool = False,
            client: MlflowClient | None = None) -> Decision:
    """Resolve, decide and (unless dry_run) apply. Raises TrackingError with one line on any registry problem.

    A real promotion reads the holder and applies under the model's promotion lock, so a concurrent
    promoter decides against the version this one put there, never against a holder read before.
    """
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = client or MlflowClient()
    try:
        if dry_run:
            decision = _decide(client, model_name, candidate, gate)
        else:
            _registered_model(client, model_name)  # a mistyped name fails before any lock is created
            with promotion_lock(client, model_name) as held:
                decision = _decide(client, model_name, candidate, gate)
                if not decision.changes_nothing:
                    held.confirm()  # a promoter paused past the lock's staleness no longer holds it
                    apply_decision(client, model_name, decision)
        _tag_project_run(client, decision, dry_run)
        return decision
    except MlflowException as exc:
        raise registry_failure(exc, model_name) from None
