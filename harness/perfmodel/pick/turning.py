"""Where the choice at a GPU count turns on the optimizer's share of the step: a CPU's optimizer time is no GPU's, so
the pick is said with the share of the one-GPU step at which it changes, where it changes between none and the
CPU's (words.choice_words, choice_table's notes)."""

from __future__ import annotations


def turning_share(choice, without, *, optimizer_ms: float, step_ms: float) -> str:
    """Where the pick at this GPU count (`choice`, a choice.Choice) changes when the optimizer takes no time
    (`without`: the choice then, or None): ' if the optimizer takes 15% of the one-GPU step or more, else stock'
    (whose step the line gives among the others), the share where the two picks' steps cross (each step is linear in
    the optimizer's time); '' where the pick holds either way."""
    if without is None or not choice.picked or not without.picked or not step_ms:
        return ""
    here, there = choice.fastest, without.fastest
    if here.strategy == there.strategy:
        return ""
    steps = {c.strategy: c.step_ms for c in (*without.picked, *without.others)}
    as_profiled = {c.strategy: c.step_ms for c in (*choice.picked, *choice.others)}
    tied = {c.strategy for c in choice.picked}  # a pick already too close to call with the other says so
    if choice.open_on or here.strategy not in steps or there.strategy not in as_profiled or there.strategy in tied:
        return ""
    gap_without = steps[here.strategy] - steps[there.strategy]  # > 0: the pick is slower with no optimizer time
    gap_here = here.step_ms - as_profiled[there.strategy]  # < 0: it is faster as profiled
    if not gap_without > 0 > gap_here:  # the steps do not cross between no optimizer time and the CPU's
        return ""
    share = gap_without / (gap_without - gap_here) * optimizer_ms / step_ms
    said = f" if a GPU's optimizer takes {share:.{int(share < 0.01)}%} of the one-GPU step or more, else "
    return said + there.strategy if share >= 0.001 else ""  # below: 'takes 0% or more', so always: no condition
