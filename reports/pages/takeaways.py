"""One sentence per section, computed from the run: what its figures show, said before them.

Pure functions over a run's configs; each returns "" when the run has nothing to say there (one
world size, nothing measured), never a sentence about data that is not in the run. Every sentence
reads the answer table's pooled frame (answer.ranked: one row per strategy, repeats pooled), so the
page names one fastest strategy, and no sentence lists a repeat as if it were a strategy.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis import stats
from reports.aggregate import world_label
from reports.pages import answer


def _largest_world(configs: pd.DataFrame, *, workload: str) -> pd.DataFrame:
    """The pooled strategies (answer.ranked) at the run's largest world size, the floor (the baseline) left out."""
    frame = answer.ranked(configs, workload=workload)
    if frame.empty:
        return frame
    return frame[(frame["world_size"] == frame["world_size"].max()) & ~frame["is_floor"]]


def fastest(configs: pd.DataFrame, *, workload: str, confidence: float = stats.CONFIDENCE) -> str:
    """'At 2 ranks bucketed is fastest (114.3 ms); next, …; naive is slowest (2.63× its time).' ('leads' where
    the repeats do not back it).
    The same verdict as the answer table's headline at that world size (answer.lead), at the run's
    confidence (answer.run_confidence)."""
    frame = answer.ranked(configs, workload=workload, confidence=confidence)
    if frame.empty:
        return ""
    group = frame[frame["world_size"] == frame["world_size"].max()]
    contenders = group[~group["is_floor"]]
    if contenders.empty:
        return ""
    name, words = answer.lead(group)
    sentence = f"At {world_label(int(group['world_size'].iloc[0]))} {name}{words}"
    if len(contenders) > 2:  # with two, 'next' already named the slowest
        best, worst = contenders.iloc[0], contenders.iloc[-1]
        sentence += f"; {worst['strategy']} is slowest ({worst['step_ms'] / best['step_ms']:.2f}× its time)"
    return sentence + "."


def scaling(configs: pd.DataFrame, *, workload: str) -> str:
    """'At 2 ranks, share of linear scaling kept (pooled over repeats): bucketed 72%, stock 67%.' Each figure
    is stats.pooled_scaling's: the repeats' throughput at n ranks (geometric mean) over n × the one-rank
    repeats' (geometric mean), never one repeat's one-rank launch (answer.ranked)."""
    rows = _largest_world(configs, workload=workload)
    rows = rows[rows["world_size"] > 1].dropna(subset=["scaling_efficiency"]) if not rows.empty else rows
    if rows.empty:
        return ""
    ranked = rows.sort_values("scaling_efficiency", ascending=False, kind="stable")
    parts = [f"{r.strategy} {r.scaling_efficiency:.0%}" for r in ranked.itertuples()]
    repeats = " (pooled over repeats)" if (ranked["repeats"] > 1).any() else ""
    world = world_label(int(ranked["world_size"].iloc[0]))
    return f"At {world}, share of linear scaling kept{repeats}: {', '.join(parts)}."


def communication(configs: pd.DataFrame, *, workload: str) -> str:
    """'At 2 ranks bucketed hides 42% of its communication (76.4 ms per step, mean) …; naive hides none
    (by design: it communicates after backward).' The reason only where it holds: strategies that declare
    every collective after backward (`comm_after_backward`), with nothing for compute to hide them behind."""
    rows = _largest_world(configs, workload=workload)
    if rows.empty:
        return ""
    rows = rows[rows["comm_ms"].map(lambda ms: ms is not None and ms > 0)].dropna(subset=["overlap_efficiency"])
    if rows.empty:
        return ""
    ranked = rows.sort_values("overlap_efficiency", ascending=False, kind="stable")
    hiding = [r for r in ranked.itertuples() if r.overlap_efficiency >= 0.005]
    said = [
        f"{r.strategy} hides {r.overlap_efficiency:.0%} of its communication ({r.comm_ms:.1f} ms per step, mean)"
        for r in hiding
    ]
    none = [r for r in ranked.itertuples() if r.overlap_efficiency < 0.005]
    by_design = [r.strategy for r in none if r.comm_after_backward]
    others = [r.strategy for r in none if not r.comm_after_backward]
    if others:
        said.append(f"{' and '.join(others)} hide{'s' if len(others) == 1 else ''} none")
    if by_design:
        one = len(by_design) == 1
        said.append(
            f"{' and '.join(by_design)} hide{'s' if one else ''} none (by design: "
            f"{'it communicates' if one else 'they communicate'} after backward)"
        )
    return f"At {world_label(int(ranked['world_size'].iloc[0]))} " + "; ".join(said) + "."


def memory(configs: pd.DataFrame, *, workload: str) -> str:
    """'At 2 ranks the largest peak is stock's (1.2 GiB), the smallest fsdp's (0.4 GiB).' Each strategy's
    peak is the highest any of its repeats reached (the one to plan for)."""
    frame = answer.ranked(configs, workload=workload)
    if frame.empty:
        return ""
    rows = frame[frame["world_size"] == frame["world_size"].max()]
    column = next((c for c in answer.MEMORY_PEAKS if rows[c].map(lambda v: v is not None).any()), None)
    if column is None:
        return ""
    rows = rows[rows[column].map(lambda v: v is not None)].sort_values(column, kind="stable")
    what = "GPU memory (NVML)" if column == "mem_peak_nvml_mb" else "process memory (RSS)"
    low, high = rows.iloc[0], rows.iloc[-1]
    world = world_label(int(low["world_size"]))
    if low["strategy"] == high["strategy"]:
        return f"At {world} the peak {what} is {_mib(high[column])}."
    return (
        f"At {world} the largest peak {what} is {high['strategy']}'s ({_mib(high[column])}), "
        f"the smallest {low['strategy']}'s ({_mib(low[column])})."
    )


def _mib(value: float) -> str:
    return f"{value / 1024:.2f} GiB" if value >= 1024 else f"{value:.0f} MiB"
