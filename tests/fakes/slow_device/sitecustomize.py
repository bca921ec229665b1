"""A device with a minimum step time, for end-to-end tests whose timing must not hang on the machine's load.

On PYTHONPATH with BRIDGETOWER_TEST_STEP_S set, each optimizer step of the process ends no sooner than
that long after the previous one (a real accelerator's step takes 0.1-1 s; the tiny preset's on an idle
CPU ~0.1 s, so a 60-step run would end inside one 5 s shipment of the metric buffer). A loaded
machine that is slower already waits for nothing.
"""

import os
import time

_STEP_S = float(os.environ.get("BRIDGETOWER_TEST_STEP_S") or 0)
if _STEP_S > 0:
    from torch.optim.optimizer import register_optimizer_step_post_hook

    _last_end = {}

    def _pace(optimizer, args, kwargs):
        previous = _last_end.get(id(optimizer))
        if previous is not None:
            time.sleep(max(0.0, _STEP_S - (time.monotonic() - previous)))
        _last_end[id(optimizer)] = time.monotonic()

    register_optimizer_step_post_hook(_pace)
