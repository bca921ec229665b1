"""A device with a minimum step time, for end-to-end tests whose timing must not hang on the machine's load.

On PYTHONPATH with BRIDGETOWER_TEST_STEP_S set, each optimizer step of the process ends no sooner than
that long after the previous one (a real accelerator's step takes 0.1-1 s; the tiny preset's on an idle
CPU ~0.1 s, so a 60-step run would end inside one 5 s shipment of the metric buffer). A loaded
machine that is slower already waits for nothing.

With BRIDGETOWER_TEST_HOLD_FILE and BRIDGETOWER_TEST_HOLD_AT set too, the step of that number does not
end while the file exists (a long step, as a real device stalls): a test can keep a run alive past an
event it does not control the length of, such as a server that takes long to start again.

With BRIDGETOWER_TEST_STEP_FILE set, the number of optimizer steps this process has taken is written there
after each one (replaced whole): a test waits on the steps a run really made instead of sleeping.
"""

import os
import time

_STEP_S = float(os.environ.get("BRIDGETOWER_TEST_STEP_S") or 0)
_HOLD_FILE = os.environ.get("BRIDGETOWER_TEST_HOLD_FILE")
_HOLD_AT = int(os.environ.get("BRIDGETOWER_TEST_HOLD_AT") or 0)
_STEP_FILE = os.environ.get("BRIDGETOWER_TEST_STEP_FILE")


def _record(steps):
    temporary = f"{_STEP_FILE}.{os.getpid()}"
    with open(temporary, "w") as handle:
        handle.write(str(steps))
    os.replace(temporary, _STEP_FILE)


if _STEP_S > 0:
    from torch.optim.optimizer import register_optimizer_step_post_hook

    _last_end, _steps = {}, {}

    def _pace(optimizer, args, kwargs):
        key = id(optimizer)
        _steps[key] = _steps.get(key, 0) + 1
        previous = _last_end.get(key)
        if previous is not None:
            time.sleep(max(0.0, _STEP_S - (time.monotonic() - previous)))
        while _HOLD_FILE and _steps[key] == _HOLD_AT and os.path.exists(_HOLD_FILE):
            time.sleep(0.1)
        _last_end[key] = time.monotonic()
        if _STEP_FILE:
            _record(_steps[key])

    register_optimizer_step_post_hook(_pace)
