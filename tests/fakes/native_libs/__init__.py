"""The vendors' Python bindings run for real; only the native library beneath their ctypes calls is faked.

nvml_stub.c stands in for libnvidia-ml.so.1 under pynvml (nvidia-ml-py), hlml_stub.c for libhlml.so
under pyhlml (habana-pyhlml). gcc compiles each at test time, cached by source hash (build.py). A test
requests the `nvml_stub` or `hlml_stub` fixture (import it into the test module) and describes the host
with Gpu/Mig or Hpu entries; the stub reads that table at every call.
"""

from .hlml import MODULE_IDS, HlmlStub, Hpu, hlml_stub, hpus
from .nvml import MIG_REFUSES, Gpu, Mig, NvmlStub, gpus, nvml_stub

__all__ = ["MIG_REFUSES", "MODULE_IDS", "Gpu", "HlmlStub", "Hpu", "Mig", "NvmlStub", "gpus", "hlml_stub", "hpus",
           "nvml_stub"]
