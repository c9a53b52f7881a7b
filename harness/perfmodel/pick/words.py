"""The choice on a cluster in words (`choice_words`, what `predict --cluster` and the what-if page say): per GPU count
the strategy picked and its step, the others beside it (how far behind, or what they need where they do not fit), a
tie, a pick open on the own-cost bounds or turning on the optimizer's share, and the strategies it leaves out."""

from __future__ import annotations

import dataclasses

import pandas as pd

from harness.perfmodel.memory_words import tight_words, unchosen_words
from harness.perfmodel.pick import bounds
from harness.perfmodel.pick.choice import Candidate, Choice, choose, whole_step, without_optimizer
from harness.perfmodel.pick.turning import turning_share


def step_text(c: Candidate) -> str:
    """'stock 100 ms', or where its floor at the full size ranks it: 'fsdp at least 1720 ms (full-size floor; 234 ms
    as profiled)'; a step bounded by its own cost (a CPU's) as its range: 'fsdp 90–102 ms (from none of its own cost,
    unmeasured on a GPU, to a CPU's, scaled)'."""
    if c.note:
        return f"{step_text(dataclasses.replace(c, note=''))} ({c.note})"
    name = c.named + "," * (c.cap_mb is not None)  # 'stock at 100 MiB, at least …'
    step = bounds.span_text(c.step_ms, whole_step(c))
    own = f" ({bounds.own_range(c.whose)})" * c.bounded
    if c.profiled_ms is None:
        return f"{name} {step} ms{own}"
    smaller = ", the smaller model's shards" if c.profiled_ms > c.step_ms else ""  # ZeRO-1's, REPLACED
    return f"{name} at least {step} ms{own} (full-size floor; {c.profiled_ms:.4g} ms as profiled{smaller})"


def choice_words(state: pd.DataFrame, frames: list[pd.DataFrame], capacity_gib: float, *, optimizer_ms: float = 0.0,
                 step_ms: float = 0.0, errors: dict[str, list[float]] | None = None,
                 made: tuple[list[Choice], dict[int, Choice]] | None = None) -> str:  # fmt: skip
    """'the fastest predicted step of …: w8 zero 93.8 ms (stock does not fit: 100 GiB a rank); w64 stock 100 ms or
    zero 100.3 ms (too close to call: …); fsdp fits too, with no step model: …' for `state` labelled by `strategy`;
    '' where `choose` has nothing to say. `optimizer_ms` (of `step_ms`), a CPU's optimizer time: a pick that
    changes with none is said with the share it turns on (`turning_share`). `errors`: as `choose` takes them; `made`:
    the choices with and without the optimizer (choice_table.chosen), where the caller has them already."""
    from harness.perfmodel.memory import mib_text

    choices = choose(state, frames, capacity_gib, errors) if made is None else made[0]
    if not choices:
        return ""
    without = made[1] if made is not None else {c.world_size: c for c in choose(
        state, without_optimizer(frames, optimizer_ms), capacity_gib, errors)} if optimizer_ms else {}  # fmt: skip

    def other(c: Candidate, choice: Choice) -> str:
        if not c.fits:
            return f"{c.strategy} does not fit: {mib_text(c.need_mb)} a rank"
        lead = bounds.lead_words(*choice.behind(c), choice.lead_ends(c), choice.whose) if choice.picked else ""
        return step_text(c) + f", {lead}" * bool(lead)

    parts = []
    for choice in choices:
        picked = " or ".join(step_text(c) + f" (fits tight: {tight_words(c.need_mb, capacity_gib)})" * c.tight
                             for c in choice.picked) or "no modelled strategy fits"  # fmt: skip
        tied = " (too close to call: under the 4 % the model can tell)" if len(choice.picked) > 1 else ""
        if choice.apart:  # the models' own errors tie them wider than 4 %
            tied = (f" (too close to call: a lead under {choice.apart:.0%} is within how far the step models "
                    "missed this run's own steps)")  # fmt: skip
        if choice.open_on:  # the pick flips inside the own-cost bounds: no booking on the model's word
            tied = f" ({bounds.open_words(choice)})"
        beside = "; ".join(other(c, choice) for c in choice.others)
        turns = turning_share(choice, without.get(choice.world_size), optimizer_ms=optimizer_ms, step_ms=step_ms,
                              errors=errors)  # fmt: skip
        beside = "; ".join([beside, *(f"{step_text(c)}, not benched: bench it to see what a rank holds"
                                      for c in choice.unbenched)]).strip("; ")  # fmt: skip
        parts.append(f"w{choice.world_size} {picked}{tied}{turns}" + (f" ({beside})" if beside else ""))
    rest = "".join(f"; {words}" for words in unchosen_words(state, choices, capacity_gib))
    every = [c for choice in choices for c in (*choice.picked, *choice.others)]
    floored = " (or its floor with the full size's parameters, where higher)" * any(c.profiled_ms for c in every)
    return (f"the fastest predicted step{floored} of the strategies the run measured whose memory at the step's "
            "peak, as counted (model state, activations, gradient buckets, FSDP's unsharded parameters and gradients, "
            "a GPU's optimizer temporaries, PowerSGD's error feedback and bucket copies), fits "
            f"{capacity_gib:g} GiB (before buffers and working memory): "
            f"{'; '.join(parts)}{rest}")  # fmt: skip
