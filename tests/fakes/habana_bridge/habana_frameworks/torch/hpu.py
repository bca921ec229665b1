import os

from habana_frameworks._record import record


def _count() -> int:
    return int(os.environ.get("FAKE_HPU_COUNT", "8"))


def is_available() -> bool:
    if _count():
        record("devices_acquired", count=_count())
    return _count() > 0


def device_count() -> int:
    return _count()


def get_device_name() -> str:
    return os.environ.get("FAKE_HPU_NAME", "GAUDI2")


def max_memory_allocated() -> int:
    return 3 * 2**30


def memory_stats(device=None) -> dict:
    """The bridge's allocator counters, in bytes (the keys Habana documents; optimum-habana reads three)."""
    in_use = 2 * 2**30
    return {"Limit": 94 * 2**30, "InUse": in_use, "MaxInUse": max_memory_allocated(), "NumAllocs": 120,
            "NumFrees": 80, "ActiveAllocs": 40, "MaxAllocSize": 2**28, "TotalSystemAllocs": 12,
            "TotalSystemFrees": 0, "TotalActiveAllocs": 40}
