"""Fake of a Habana CPU-operator kernel module (pybind11), imported by its operator's schema; not faked."""


def __getattr__(name: str):
    raise AttributeError(f"{__name__}.{name} is not faked: the fake natives run ImageDecoder -> CropMirrorNorm only")
