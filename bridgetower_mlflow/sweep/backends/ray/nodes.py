"""Where a sweep's cells go on a Ray cluster: one node per cell, by a `bridgetower_host` slot or by node affinity.

Node dicts are what `ray.nodes()` returns (NodeID, Alive, Resources = the node's totals).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .checks import HOST_RESOURCE

SLOT = "slot"  # every cell also holds one `bridgetower_host`: Ray keeps two cells (of any sweep) off one node
AFFINITY = "affinity"  # the driver pins each cell to a node none of this sweep's cells holds
SHARED = "shared"  # exclusive hosts off: Ray places cells by their resources alone


def fits(request: dict[str, float], node: dict) -> bool:
    """The node is alive and has, in all, what one cell asks for."""
    resources = node.get("Resources") or {}
    return bool(node.get("Alive")) and all(resources.get(key, 0) >= value for key, value in request.items())


@dataclass(frozen=True)
class Placement:
    mode: str
    request: dict[str, float]  # what each cell's task holds (its devices, plus the slot in SLOT mode)
    notes: tuple[str, ...] = ()


def choose_placement(request: dict[str, float], nodes: list[dict], exclusive: bool) -> Placement:
    """The slot where the cluster offers it on a node that fits a cell, else node affinity; shared when asked."""
    if not exclusive:
        return Placement(SHARED, request, ("exclusive hosts off: cells may share a node, and its CPU cores, "
                                           "with other cells",))
    usable = [node for node in nodes if fits(request, node)]
    slotted = [node for node in usable if node["Resources"].get(HOST_RESOURCE, 0) >= 1]
    if slotted:
        left_out = len(usable) - len(slotted)
        notes = (f"{left_out} node(s) without a `{HOST_RESOURCE}` slot run no cells",) if left_out else ()
        return Placement(SLOT, {**request, HOST_RESOURCE: 1.0}, notes)
    return Placement(AFFINITY, request, (
        f"one cell per node by node affinity ({len(usable)} usable node(s), none with a `{HOST_RESOURCE}` "
        "slot): this sweep's cells never share a node; other Ray work on the cluster still may",))


class NodePool:
    """AFFINITY mode's bookkeeping: which usable node is free, which hold a cell, which were lost."""

    def __init__(self, request: dict[str, float], list_nodes: Callable[[], list[dict]]):
        self.request = request
        self.list_nodes = list_nodes  # ray.nodes, asked afresh: nodes join and die while a sweep runs
        self.busy: set[str] = set()
        self.lost: set[str] = set()

    def claim(self) -> str | None:
        """A free usable node for the next cell (now held by it), or None when every usable node is busy."""
        for node in self.list_nodes():
            node_id = node["NodeID"]
            if node_id not in self.busy and node_id not in self.lost and fits(self.request, node):
                self.busy.add(node_id)
                return node_id
        return None

    def release(self, node_id: str, lost: bool) -> None:
        """The node's cell ended; a lost node is never picked again (a restarted node comes back with a new id)."""
        self.busy.discard(node_id)
        if lost or not self.alive(node_id):
            self.lost.add(node_id)

    def alive(self, node_id: str) -> bool:
        """Whether the cluster still lists the node as alive."""
        return any(node["NodeID"] == node_id and node.get("Alive") for node in self.list_nodes())

    def describe_lost(self) -> str:
        """Why no node is left, for the cells that could not run."""
        lost = ", ".join(sorted(node_id[:12] for node_id in self.lost)) or "none"
        return (f"no usable Ray node left for the cell (every node with {_wanted(self.request)} is gone; "
                f"lost during this sweep: {lost})")


def _wanted(request: dict[str, float]) -> str:
    return ", ".join(f"{key} {value:g}" for key, value in request.items())
