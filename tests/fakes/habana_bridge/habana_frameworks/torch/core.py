from habana_frameworks.torch.utils.internal import is_lazy

mark_steps = 0


def mark_step(device_str: str = "", sync: bool = False) -> None:
    global mark_steps
    if is_lazy():
        mark_steps += 1
