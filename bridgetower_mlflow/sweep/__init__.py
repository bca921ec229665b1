"""The sweep entry point: a grid of train runs as nested children, then compare over them."""
