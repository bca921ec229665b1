"""Where a step goes, as compare reads it: the phase breakdown train logs, and the phase behind a speedup's gap.

Runs logged before the breakdown existed have no phases: they show none, never zeros.
"""

from __future__ import annotations

from ..contract import PHASE_FORWARD_BACKWARD, PHASES, phase_fraction_metric, phase_seconds_metric

# Every phase a run can log, in the step's order; a merged forward_backward sits where its parts would.
PHASE_ORDER = (*PHASES[:4], PHASE_FORWARD_BACKWARD, *PHASES[4:])
MERGED_PARTS = (PHASES[2], PHASES[3])  # forward and backward
# (verb, what) for the headline's sentence, `h100 waits 31 % on data, gaudi2 4 %`; short column names
PHASE_WORDS = dict(zip(PHASE_ORDER, (
    ("waits", "on data"), ("spends", "copying to the device"), ("spends", "in forward"), ("spends", "in backward"),
    ("spends", "in forward+backward"), ("spends", "in the optimizer step"), ("spends", "in all-reduce"),
    ("spends", "in other host work"))))
SHORT_LABELS = {PHASES[0]: "data wait", PHASES[1]: "to device", PHASE_FORWARD_BACKWARD: "fwd+bwd",
                PHASES[5]: "all-reduce"}
PHASE_SHORT = {phase: SHORT_LABELS.get(phase, phase) for phase in PHASE_ORDER}  # the rest name themselves

Phases = tuple[tuple[str, float], ...]
Side = tuple[dict[str, float], dict[str, float]]  # (shares, seconds per step) of one cell


def read_phases(metrics: dict[str, float]) -> tuple[Phases, Phases]:
    """(fractions, seconds per step) of the phases a run logged, in PHASE_ORDER; empty where it logged none."""
    fractions = tuple((p, float(metrics[phase_fraction_metric(p)])) for p in PHASE_ORDER
                      if metrics.get(phase_fraction_metric(p)) is not None)
    seconds = tuple((p, float(metrics[phase_seconds_metric(p)])) for p in PHASE_ORDER
                    if metrics.get(phase_seconds_metric(p)) is not None)
    return fractions, seconds


def merged_like(values: dict[str, float], other: dict[str, float]) -> dict[str, float]:
    """`values` with forward and backward merged where `other` has them merged (Gaudi lazy mode)."""
    if PHASE_FORWARD_BACKWARD not in other or PHASE_FORWARD_BACKWARD in values:
        return values
    if not all(part in values for part in MERGED_PARTS):
        return values
    merged = {k: v for k, v in values.items() if k not in MERGED_PARTS}
    merged[PHASE_FORWARD_BACKWARD] = sum(values[part] for part in MERGED_PARTS)
    return merged


def _comparable(first: dict[str, float], second: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    return merged_like(first, second), merged_like(second, first)


def gap_phase(slow: Side, fast: Side) -> str | None:
    """The phase where the slower cell spends the most more than the faster one.

    Each side is (fractions, seconds per step); seconds are compared where both sides have them (the same
    batch and devices: a step is the same work), else fractions.
    """
    use_seconds = bool(slow[1]) and bool(fast[1])
    mine, theirs = _comparable(slow[1], fast[1]) if use_seconds else _comparable(slow[0], fast[0])
    gaps = {phase: mine[phase] - theirs[phase] for phase in PHASE_ORDER if phase in mine and phase in theirs}
    phase = max(gaps, key=lambda p: gaps[p], default=None)
    return phase if phase is not None and gaps[phase] > 0 else None


def gap_sentence(slow_name: str, slow: Side, fast_name: str, fast: Side) -> str | None:
    """`h100 waits 31 % on data, gaudi2 4 %`: the phase behind most of the gap, as both sides' shares."""
    phase = gap_phase(slow, fast)
    if phase is None:
        return None
    slow_share, fast_share = _comparable(slow[0], fast[0])
    if phase not in slow_share or phase not in fast_share:
        return None
    verb, what = PHASE_WORDS[phase]
    return f"{slow_name} {verb} {slow_share[phase] * 100:.0f} % {what}, {fast_name} {fast_share[phase] * 100:.0f} %"
