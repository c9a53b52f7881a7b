"""Where the choice at a GPU count turns on the optimizer's share of the step: a CPU's optimizer time is no GPU's, nor
is an estimate of a GPU's, so the pick is said with the share of the one-GPU step below which it no longer leads
alone, where that lies between none and the share profiled (words.choice_words, choice_table's notes)."""

from __future__ import annotations

from harness.analysis import agreement


def turning_share(choice, without, *, optimizer_ms: float, step_ms: float, errors=None) -> str:
    """Where the pick at this GPU count (`choice`, a choice.Choice, picked alone) no longer leads alone when the
    optimizer takes less time (`without`: the choice with none, or None): ' if a GPU's optimizer takes 15% of the
    one-GPU step or more, else stock' (or 'else stock or fsdp (a tie)'), the share where another's step comes within
    what the model can tell of the pick's (agreement.SMALL_CAP_LEAD, or the step models' own errors apart:
    choice.model_apart, `errors`; each step is linear in the optimizer's time), the tie that books first what DDP
    is, before the steps cross; '' where the pick leads alone either way, or is too close to call already."""
    from harness.perfmodel.pick.choice import model_apart

    if without is None or len(choice.picked) != 1 or not without.picked or not step_ms or choice.open_on:
        return ""
    here = choice.picked[0]
    if [c.strategy for c in without.picked] == [here.strategy]:
        return ""
    steps = {c.strategy: c.step_ms for c in (*without.picked, *without.others) if c.fits}
    if here.strategy not in steps:
        return ""
    shares = []
    for c in (c for c in choice.others if c.fits and c.step_ms is not None and c.strategy in steps):
        band = 1 + max(agreement.SMALL_CAP_LEAD, model_apart(here, c, errors))
        gap_without = steps[c.strategy] - band * steps[here.strategy]  # ≤ 0: tied with the pick, or ahead, with none
        gap_here = c.step_ms - band * here.step_ms  # > 0: behind the pick by more than the model can tell
        if gap_without <= 0 < gap_here:  # each gap is linear in the optimizer's time: it closes in between
            shares.append(-gap_without / (gap_here - gap_without) * optimizer_ms / step_ms)
    if not shares or max(shares) < 0.001:  # below: 'takes 0% or more', so always: no condition
        return ""
    share = max(shares)
    otherwise = " or ".join(c.strategy for c in without.picked) + " (a tie)" * (len(without.picked) > 1)
    return f" if a GPU's optimizer takes {share:.{int(share < 0.01)}%} of the one-GPU step or more, else {otherwise}"
