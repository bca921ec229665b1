import os


def is_lazy() -> bool:
    if is_lazy._is_lazy is None:
        is_lazy._is_lazy = os.getenv("PT_HPU_LAZY_MODE", "0") != "0"
    return is_lazy._is_lazy


is_lazy._is_lazy = None
