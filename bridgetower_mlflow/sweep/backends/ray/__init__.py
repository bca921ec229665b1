"""`sweep --backend ray`: backend (RayBackend: connect, place, run and cancel the cells), checks (what is checked
before any run exists), nodes (which node a cell goes to), task (one cell as a Ray task, on its node), results
(what an ended task becomes). Ray loads lazily; `import ray` in these modules is the Ray library."""

from .backend import RayBackend, RaySettings

__all__ = ["RayBackend", "RaySettings"]
