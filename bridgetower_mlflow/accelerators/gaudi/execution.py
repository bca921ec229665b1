"""Gaudi's execution mode: chosen before torch loads the HPU bridge, read back from the bridge after.

Since Gaudi software 1.18 `import torch` autoloads the bridge, which loads its lazy or its eager
library once, from PT_HPU_LAZY_MODE (unset: eager on current releases). The study's GaudiTrainer path
trains lazily (HPU graphs); the native Trainer path trains eagerly with torch.compile (hpu_backend),
Habana's default recipe, or lazily with mark_step after backward and after the optimizer step.
"""

from __future__ import annotations

LAZY, EAGER = "lazy", "eager"
FALSE_WORDS = ("0", "false", "no", "off")


def wanted_mode(optimum_path: bool, hf_args: tuple) -> str:
    """Lazy for GaudiTrainer unless the user passed `--use_lazy_mode false`; eager for the native path."""
    if not optimum_path:
        return EAGER
    args = list(hf_args)
    for index, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--use_lazy_mode=") else (
            args[index + 1] if arg == "--use_lazy_mode" and index + 1 < len(args) else None)
        if value is not None and value.strip().lower() in FALSE_WORDS:
            return EAGER
    return LAZY


def loaded_mode() -> str:
    """What the bridge actually loaded (its answer is fixed at import; the variable may say otherwise)."""
    from habana_frameworks.torch.utils.internal import is_lazy

    return LAZY if is_lazy() else EAGER


def mark_step_callback():
    """Habana's lazy-mode recipe for a plain Trainer: mark_step after backward and after optimizer.step."""
    import habana_frameworks.torch.core as htcore
    from transformers import TrainerCallback

    class MarkStep(TrainerCallback):
        def on_substep_end(self, args, state, control, **kwargs):  # a gradient-accumulation micro-step
            htcore.mark_step()

        def on_pre_optimizer_step(self, args, state, control, **kwargs):  # the last backward is done
            htcore.mark_step()

        def on_optimizer_step(self, args, state, control, **kwargs):
            htcore.mark_step()

    return MarkStep()


def compile_kwargs(optimum_path: bool) -> dict:
    """Eager mode's recipe: torch.compile with the HPU backend (GaudiTrainer's HPU graphs are lazy-only)."""
    kwargs = {"torch_compile": True, "torch_compile_backend": "hpu_backend"}
    return {**kwargs, "use_lazy_mode": False, "use_hpu_graphs_for_inference": False} if optimum_path else kwargs
