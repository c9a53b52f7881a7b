"""Where a sharding strategy's lead over stock on a CPU run is its optimizer step's: said beside the answer's headline.

A CPU's optimizer step is a large share of its step (Adam over a recommender's embedding: 82 % of it), and ZeRO-1 and
FSDP2 step only their shard of it, so on the CPU they lead by what a GPU's optimizer, a far smaller share there, would
not give them (predict ranked ZeRO-1 15 % behind stock on dgx-h100 where the CPU run had it 2.19× faster). The lead's
parts come from the run's own phase columns (the slowest rank's mean segments, aggregate.phase_means), each
configuration's repeats averaged. Pure: DataFrames in, words out.
"""

from __future__ import annotations

import pandas as pd

from reports.pages.html import esc

MOST = 0.5
"""The optimizer step's part of the lead above which the lead is said to rest on it."""


def optimizer_part(phases: pd.DataFrame, config_ids) -> tuple[float, float] | None:
    """(mean step, mean optimizer step) in ms over these configurations' phase means; None where none has both."""
    if phases.empty or "config_id" not in phases:
        return None
    rows = phases[phases["config_id"].isin(list(config_ids))][["step_ms", "optimizer_ms"]].dropna()
    return None if rows.empty else (float(rows["step_ms"].mean()), float(rows["optimizer_ms"].mean()))


def optimizer_lead(contenders: pd.DataFrame, reference: pd.Series | None, run) -> str:
    """' On this CPU 80% of its lead over stock is the optimizer step (747 → 289 ms, 67% of stock's step): a GPU's
    optimizer takes another share, so `ddpbench predict …` gives a GPU's answer.' where the leader (the first of
    `contenders`, the answer's rows but the floor) shards its state, `run` (aggregate.RunData) ran on the CPU and its
    optimizer step is over MOST of its lead over `reference` (stock), in the run's phase means; '' else."""
    configs, phases = run.configs, run.phases
    if contenders.empty or reference is None or "device" not in configs or not (configs["device"] == "cpu").all():
        return ""
    best = contenders.iloc[0]
    if best["strategy"] == reference["strategy"] or not bool(best.get("shards_state")):
        return ""
    mine, theirs = optimizer_part(phases, best["config_ids"]), optimizer_part(phases, reference["config_ids"])
    if mine is None or theirs is None or mine[0] >= theirs[0]:
        return ""
    share = (theirs[1] - mine[1]) / (theirs[0] - mine[0])
    if share <= MOST:
        return ""
    command = f"ddpbench predict --run {run.meta.get('run_id') or 'RUN'} --cluster NAME --local-step-ms MS"
    them, impl = esc(str(reference["strategy"])), esc(str(reference["impl"]))
    return (f" On this CPU {min(share, 1.0):.0%} of its lead over {them} is the optimizer step ({theirs[1]:.0f} → "
            f"{mine[1]:.0f} ms, {theirs[1] / theirs[0]:.0%} of {impl}'s step): a GPU's optimizer takes another share, "
            f"so <code>{esc(command)}</code> gives a GPU's answer.")  # fmt: skip
