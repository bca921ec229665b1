"""The sweep entry point: a grid of train runs as nested children, then compare over them."""

from .command import sweep_command

__all__ = ["sweep_command"]
