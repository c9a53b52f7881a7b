"""Where a sharding strategy's lead over stock on a CPU run is its optimizer step's, said so (the run page's headline
and bench's last verdicts).

A CPU's optimizer step is a large share of its step (Adam over a recommender's embedding: 82 % of it), and ZeRO-1 and
FSDP2 step only their shard of it, so on the CPU they lead by what a GPU's optimizer, a far smaller share there, may
not give them (predict ranked ZeRO-1 15 % behind stock on dgx-h100 where its CPU run had it 2.19× faster). The lead's
parts come from the run's own step columns: per configuration its slowest rank's mean step and optimizer step over the
measured steps, each strategy's configurations (its repeats) averaged; bench's line and the run page's both take them
from `config_phases`. The optimizer step is `optimizer_ms` as timed, ZeRO's broadcast in it: the step a strategy pays,
and the same figure with or without --bucket-timeline, which alone measures the broadcast apart
(`exposed_optimizer_ms`; the page's phase table takes it out, and a page once read 155 → 19 ms where bench said
155 → 55). Pure: DataFrames in, words out.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

MOST = 0.5
"""The optimizer step's part of the lead above which the lead is said to rest on it."""


def config_phases(steps: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (config_id), its slowest rank's mean step_ms and optimizer_ms (as timed: any broadcast in it
    included) over the measured steps."""
    if steps.empty or not {"config_id", "rank", "step_ms", "optimizer_ms"} <= set(steps):
        return pd.DataFrame(columns=["config_id", "step_ms", "optimizer_ms"])
    measured = steps[~steps["warmup"].astype(bool)] if "warmup" in steps else steps
    per_rank = measured.groupby(["config_id", "rank"], observed=True)[["step_ms", "optimizer_ms"]].mean().reset_index()
    slowest = per_rank.sort_values(["config_id", "step_ms"], ascending=[True, False], kind="stable")
    return slowest.drop_duplicates("config_id")[["config_id", "step_ms", "optimizer_ms"]]


def _means(phases: pd.DataFrame, config_ids: Iterable[str]) -> tuple[float, float] | None:
    """(mean step, mean optimizer step) in ms over these configurations; None where none has both."""
    if phases.empty or "config_id" not in phases:
        return None
    rows = phases[phases["config_id"].isin(list(config_ids))][["step_ms", "optimizer_ms"]].dropna()
    return None if rows.empty else (float(rows["step_ms"].mean()), float(rows["optimizer_ms"].mean()))


def lead_words(
    phases: pd.DataFrame, mine: Iterable[str], theirs: Iterable[str], reference: str, *, so_far: bool = False
) -> str:
    """'81% of its lead over stock is the optimizer step (747 → 289 ms as timed, any broadcast in it; 67% of stock's
    step)': where the configurations `mine` (a sharding strategy's) are faster than `theirs` (stock's, `reference` its
    name) in `phases` (config_phases) and over MOST of the difference is the optimizer step; '' else. `so_far`: the
    verdict is open, 'of its lead so far'."""
    ours, stock = _means(phases, mine), _means(phases, theirs)
    if ours is None or stock is None or ours[0] >= stock[0]:
        return ""
    share = (stock[1] - ours[1]) / (stock[0] - ours[0])
    if share <= MOST:
        return ""
    part = "all" if share >= 1 else f"{share:.0%}"  # all: its other phases slower, the optimizer's saving more than it
    lead = f"its lead over {reference}{' so far' * so_far}"
    return (f"{part} of {lead} is the optimizer step ({stock[1]:.0f} → {ours[1]:.0f} ms as timed, any broadcast in "
            f"it; {stock[1] / stock[0]:.0%} of {reference}'s step)")  # fmt: skip


GPU_ANSWER = "a GPU's optimizer takes another share, so {command} gives a GPU's answer"
"""What follows the words on the CPU: the command (predict --run RUN --cluster NAME --local-step-ms MS) in the
reader's form, a page's <code> or the console's invocation."""


def cpu_verdict_words(configs: pd.DataFrame, steps: pd.DataFrame, *, confidence: float, verdicts=None) -> str:
    """'w2 mlp/small zero vs stock: 81% of its lead over stock is the optimizer step (…)' for the fastest sharding
    strategy whose lead over stock in its verdict (`verdicts`, the run's strategy verdicts where already judged, else
    decide.strategy_verdicts) is mostly its optimizer step, on a CPU run; '' on a GPU run or where none is."""
    from harness.analysis import roles
    from harness.analysis.verdicts import decide

    if configs.empty or "device" not in configs or not (configs["device"] == "cpu").all():
        return ""
    rows, phases = roles.with_roles(configs).set_index("config_id"), config_phases(steps)
    said = []
    for verdict in decide.strategy_verdicts(configs, confidence=confidence) if verdicts is None else verdicts:
        at = rows.loc[[i for i in verdict.config_ids if i in rows.index]]
        stock = at["reference"].fillna(False).astype(bool)
        mine = at[~stock]
        if mine.empty or not mine["shards_state"].fillna(False).astype(bool).all():
            continue
        reference = verdict.subject.rpartition(" vs ")[2]
        if words := lead_words(phases, mine.index, at.index[stock], reference, so_far=not verdict.decided):
            said.append((float(mine["step_ms_median"].mean()), f"{verdict.subject}: {words}"))
    return min(said)[1] if said else ""
