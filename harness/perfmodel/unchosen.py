"""What the choice of strategy on a cluster leaves out (choice.choose): the strategies that fit without a step model
(and the options the step models leave out of them), the shares of memory a run from before did not record, the
strategies whose activations were not counted.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles
from harness.perfmodel.memory import need_mb, unrecorded


def untimed_that_fit(state: pd.DataFrame, choices: list, capacity_gib: float) -> dict[str, list[int]]:
    """The strategies without a step model that fit at some GPU count of `choices`, with the counts where they do."""
    worlds = {c.world_size for c in choices}
    at = state[state["world_size"].isin(worlds) & state["activation_mb"].notna()]
    timed = {c.strategy for choice in choices for c in (*choice.picked, *choice.maybe, *choice.others)}
    fitting = at[(need_mb(at) <= capacity_gib * 1024) & ~at["strategy"].isin(timed)]
    return {name: sorted(int(w) for w in group["world_size"].unique())
            for name, group in fitting.groupby("strategy", sort=False)}  # fmt: skip


def uncounted(state: pd.DataFrame, choices: list) -> list[str]:
    """The strategies left out of the choice because their activations were not counted, in the state's order."""
    worlds = {c.world_size for c in choices}
    at = state[state["world_size"].isin(worlds)]
    counted = set(at.loc[at["activation_mb"].notna(), "strategy"])
    return [name for name in dict.fromkeys(at.loc[at["activation_mb"].isna(), "strategy"]) if name not in counted]


SAME_COLLECTIVES = ("static_graph", "gradient_as_bucket_view")
"""DDP's options that leave its buckets and all-reduces as they are (torch's reducer: static_graph skips the per-step
search for unused parameters and bucket-rebuild checks; gradient_as_bucket_view makes .grad a view of its bucket, one
copy fewer): what they change is DDP's own work on the host and its memory, which no step model here times."""


def _unmodelled_why(state: pd.DataFrame, labels: list[str]) -> str:
    """' (the step models leave out static_graph: …)': the options of `labels`' rows beyond their strategies' defaults,
    and where each is one that leaves the collectives as they are (SAME_COLLECTIVES), that their communication is
    the same strategy's without it; '' where none is known."""
    rows = state[state["strategy"].isin(labels)]
    options = sorted({key for asked in roles.beyond_defaults_of(rows) for key in asked} - {"bucket_cap_mb"})
    if not options:
        return ""
    same = [key for key in options if key in SAME_COLLECTIVES]
    said = f" (the step models leave out {', '.join(options)}"
    if same:
        said += (f"; {' and '.join(same)} change{'s' if len(same) == 1 else ''} DDP's own work on the host and its "
                 "memory, not its buckets or all-reduces: their communication is the same strategy's without "
                 f"{'it' if len(same) == 1 else 'them'}")  # fmt: skip
    return said + ")"


def unchosen_words(state: pd.DataFrame, choices: list, capacity_gib: float) -> list[str]:
    """What the choice leaves out, each in a phrase: the strategies that fit without a step model, the shares of
    memory a run from before did not record, the strategies whose activations were not counted."""
    untimed = untimed_that_fit(state, choices, capacity_gib)
    one = len(untimed) == 1
    every = sorted(c.world_size for c in choices)  # a name alone fits at every one
    where = ", ".join(name if worlds == every else f"{name} at {'/'.join(f'w{w}' for w in worlds)}"
                      for name, worlds in untimed.items())  # fmt: skip
    why = _unmodelled_why(state, list(untimed))
    said = [f"{where} fit{'s' if one else ''} too, with no step model to predict {'its' if one else 'their'} step "
            f"here{why}: the run page compares what the run measured"] if untimed else []  # fmt: skip
    if missing := unrecorded(state[state["world_size"].isin({c.world_size for c in choices})]):
        said.append(missing)
    if left := uncounted(state, choices):
        said.append(f"{', '.join(left)} left out: {'its' if len(left) == 1 else 'their'} activations were not counted")
    return said
