"""The local backend: the grid's cells one after another on this machine."""

from __future__ import annotations

from ..child import SweepContext, run_child
from ..grid import SweepCell


class LocalBackend:
    """Cells one after another on this machine."""

    name = "local"
    notes = ()

    def run_cells(self, context: SweepContext, cells: list[SweepCell], report) -> None:
        for cell in cells:
            report(run_child(context, cell))

    def close(self) -> None:
        """Nothing to release."""
