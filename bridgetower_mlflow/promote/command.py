"""`bridgetower-mlflow promote`: gated alias promotion (mlflow is imported only when it runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..cli_support import CONTEXT, bool_option, dual_option, reports_errors
from ..config import parse_bool, parse_float
from ..contract import CAPTION_MATCH_METRIC
from ..errors import PromotionRefused

if TYPE_CHECKING:
    from .decision import Decision


def summary(decision: Decision, model_name: str, dry_run: bool) -> str:
    """One line: what happened (or would happen) and why."""
    alias, version, holder = decision.alias, decision.candidate.version, decision.holder
    if decision.changes_nothing:
        return f"unchanged: {model_name} version {version} already holds @{alias}"
    if decision.promote:
        was = f" (was version {holder.version})" if holder else ""
        text = (f"would promote {model_name} version {version} to @{alias}{was}" if dry_run
                else f"promoted: {model_name} version {version} now holds @{alias}{was}")
    else:
        stays = f"@{alias} stays on version {holder.version}" if holder else f"@{alias} stays unset"
        text = f"{'would not promote' if dry_run else 'not promoted:'} {model_name} version {version}; {stays}"
    return f"{'dry run, nothing changed: ' if dry_run else ''}{text}: {decision.reason}"


@click.command("promote", context_settings=CONTEXT)
@dual_option("model_name", required=True, help="Registered model name.")
@dual_option("candidate", default="latest", show_default=True, help="A version number, an alias, or `latest`.")
@dual_option("alias", default="champion", show_default=True, help="The alias to move (not `latest` or v<digits>).")
@dual_option("metric", default=CAPTION_MATCH_METRIC, show_default=True,
         help="Compared metric: the version tag of that name, else the source run's metric.")
@dual_option("mode", default="auto", show_default=True,  # checked here: one line naming it, like every field
             help="max: higher is better; min: lower; auto: min for *loss/*error metrics, else max.")
@dual_option("min_delta", default="0", show_default=True,
             help="The candidate must beat the holder by at least this much (and by more than 0).")
@bool_option("dry_run", "Show the decision; change nothing.")
@bool_option("fail_if_not_promoted", "Exit 1 when the gate refuses (for CI).")
@bool_option("allow_different_data", "Compare even when the versions' eval data fingerprints differ.")
@reports_errors
def promote_command(**options: Any) -> None:
    """Move a registry alias to a candidate version only if its metric beats the current holder's.

    Every decision is recorded as `promotion.*` tags on the candidate version and as a line in the
    registered model's description. Exit 0 whether or not the alias moved (1 with
    --fail-if-not-promoted when it did not); 2 on any error, with the registry left unchanged.
    """
    from .decision import Gate, check_alias, resolve_mode
    from .registry import promote

    model_name, metric, alias = options["model_name"].strip(), options["metric"].strip(), options["alias"].strip()
    dry_run = parse_bool("dry_run", options["dry_run"])
    fail_if_not_promoted = parse_bool("fail_if_not_promoted", options["fail_if_not_promoted"])
    min_delta = parse_float("min_delta", options["min_delta"], 0.0)
    gate = Gate(check_alias(alias), metric, resolve_mode(metric, options["mode"].strip().lower()), min_delta,
                parse_bool("allow_different_data", options["allow_different_data"]))
    decision = promote(model_name, options["candidate"], gate, dry_run)
    line = summary(decision, model_name, dry_run)
    if fail_if_not_promoted and not decision.promote and not decision.changes_nothing:
        raise PromotionRefused(line)
    click.echo(line)
    if decision.promote and not dry_run:
        click.echo(f'load it: mlflow.pyfunc.load_model("models:/{model_name}@{alias}")')
