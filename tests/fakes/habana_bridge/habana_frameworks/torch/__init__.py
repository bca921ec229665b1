import os

from habana_frameworks._record import record
from habana_frameworks.torch.utils.internal import is_lazy

record("bridge_loaded", lazy_env=os.environ.get("PT_HPU_LAZY_MODE"), lazy=is_lazy())
