import os


def is_autoload_enabled() -> bool:
    autoload = os.getenv("PT_HPU_AUTOLOAD", "-1")
    if autoload in ("0", "1"):
        return autoload == "1"
    return os.getenv("PT_HPU_LAZY_MODE", "0") != "1"  # lazy mode is loaded explicitly, not autoloaded


def __autoload():
    if is_autoload_enabled():
        import habana_frameworks.torch  # noqa: F401
