"""The truth observer in every Python process of a run (train, its launcher, torchrun, each rank).

On PYTHONPATH with BRIDGETOWER_TRUTH_DIR set, tests/truth/truth_observer.py is loaded by path and installed: it
patches torch's and the Trainer's own code as they are imported, and writes what the process saw at exit.
"""

import os

if os.environ.get("BRIDGETOWER_TRUTH_DIR"):
    import importlib.util
    import sys

    _path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "truth", "truth_observer.py")
    _spec = importlib.util.spec_from_file_location("truth_observer", os.path.abspath(_path))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["truth_observer"] = _module
    _spec.loader.exec_module(_module)
    _module.install()
