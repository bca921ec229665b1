"""What a cell's ended Ray task becomes: the fields it returned (or why it returned none), then a ChildResult."""

from __future__ import annotations

from dataclasses import replace

from ....contract import HOST_NAME_TAG, PARENT_RUN_TAG, RAY_NODE_ID_TAG, SWEEP_CELL_TAG, SWEEP_REPEAT_TAG
from ...child import ChildResult, SweepContext, create_child, end_child
from ...grid import SweepCell

INTERRUPTED = "cancelled: the sweep was interrupted"


class NeverScheduled(Exception):
    """The cell's pinned node was gone before the task started: nothing ran, the cell can go elsewhere."""


def task_fields(ray, ref) -> tuple[dict, bool]:
    """(what the task returned, or why it did not; whether its node is gone). Raises NeverScheduled."""
    exceptions = ray.exceptions
    try:
        return ray.get(ref), False
    except exceptions.TaskCancelledError:
        return {"reason": INTERRUPTED, "status": "KILLED"}, False
    except exceptions.TaskUnschedulableError as exc:  # node affinity (soft=False) to a node that has died
        raise NeverScheduled(str(exc)) from None
    except exceptions.RayError as exc:
        return {"reason": failure_reason(exc)}, isinstance(exc, exceptions.NodeDiedError)


def child_result(context: SweepContext, cell: SweepCell, fields: dict) -> ChildResult:
    """The cell's result; a run the task could not end is ended here, and a failure with no run gets one."""
    node = f"{fields[HOST_NAME_TAG]}/{fields['node_id'][:12]}" if fields.get("node_id") else ""
    if fields.get("run_id"):  # the task ran train and ended its run itself
        return ChildResult(cell, fields["run_id"], fields["status"], fields["returncode"],
                           fields["samples_per_second"], fields["reason"], tuple(fields["tail"]), node)
    status = fields.get("status", "FAILED")
    run_id = find_child(context, cell)
    if run_id is None and status == "KILLED":
        return ChildResult(cell, "", status, None, reason=fields["reason"])  # never started: no run
    if run_id is None:  # failed before train could create its run: the failure still gets one
        run_id = create_child(replace(context, child_tags=_node_tags(fields)), cell)
    run = end_child(context.client, run_id, status, fields["reason"])
    return ChildResult(cell, run_id, run.info.status, None, reason=fields["reason"], node=node)


def _node_tags(fields: dict) -> dict:
    if not fields.get("node_id"):
        return {}
    return {HOST_NAME_TAG: fields[HOST_NAME_TAG], RAY_NODE_ID_TAG: fields["node_id"]}


def find_child(context: SweepContext, cell: SweepCell) -> str | None:
    """The child run a node created for `cell`, if it got that far."""
    query = (f"tags.`{PARENT_RUN_TAG}` = '{context.parent_run_id}' AND tags.`{SWEEP_CELL_TAG}` = '{cell.setting}' "
             f"AND tags.`{SWEEP_REPEAT_TAG}` = '{cell.repeat}'")
    runs = context.client.search_runs([context.experiment_id], query, max_results=1)
    return runs[0].info.run_id if runs else None


def failure_reason(exc: Exception) -> str:
    """One line on why a cell's task did not come back: lost node, dead worker, or the task's own error."""
    import ray.exceptions as errors

    first = (str(exc).strip().splitlines() or [""])[0][:300]
    if isinstance(exc, errors.NodeDiedError):
        return f"the Ray node running the cell was lost (NodeDiedError: {first})"
    if isinstance(exc, errors.WorkerCrashedError):
        return "the Ray worker running the cell died (WorkerCrashedError)"
    if isinstance(exc, errors.OutOfMemoryError):
        return "Ray's memory monitor killed the cell (OutOfMemoryError)"
    cause = getattr(exc, "cause", None)
    if cause is not None:
        detail = (str(cause).strip().splitlines() or [""])[0][:300]
        return f"the cell's Ray task failed on its node: {type(cause).__name__}: {detail}"
    return f"the cell's Ray task failed: {type(exc).__name__}: {first}"
