"""One sentence per section, computed from the run: what its figures show, said before them.

Pure functions over a run's configs; each returns "" when the run has nothing to say there (one
world size, nothing measured), never a sentence about data that is not in the run.
"""

from __future__ import annotations

import json

import pandas as pd

from harness.analysis.stats import DDP_DEFAULT_CAP_MB
from reports.aggregate import labelled, world_label


def _largest_world(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["world_size"] == rows["world_size"].max()] if not rows.empty else rows


def fastest(configs: pd.DataFrame, *, workload: str) -> str:
    """'At 2 ranks bucketed is fastest (114.3 ms), 1.02× stock's time; naive is slowest (2.63×).'"""
    rows = _largest_world(labelled(configs, workload=workload))
    rows = rows[rows["impl"] != "local"].dropna(subset=["step_ms_median"])
    if rows.empty:
        return ""
    ranked = rows.sort_values("step_ms_median")
    best, worst = ranked.iloc[0], ranked.iloc[-1]
    world = world_label(int(best["world_size"]))
    sentence = f"At {world} {best['label']} is fastest ({best['step_ms_median']:.1f} ms)"
    stock = _stock_as_shipped(rows)
    if stock is not None and best["config_id"] != stock["config_id"]:
        sentence += f", {stock['step_ms_median'] / best['step_ms_median']:.2f}× faster than stock"
    if len(ranked) > 1:
        sentence += f"; {worst['label']} is slowest ({worst['step_ms_median'] / best['step_ms_median']:.2f}× its time)"
    return sentence + "."


def _stock_as_shipped(rows: pd.DataFrame) -> pd.Series | None:
    """The row the answer table calls the reference: stock with no option but DDP's default cap (25 MiB)."""
    for _, row in rows[rows["impl"] == "stock"].iterrows():
        options = json.loads(row["impl_options"]) if isinstance(row["impl_options"], str) else {}
        cap = options.pop("bucket_cap_mb", None)
        if not options and (cap is None or float(cap) == DDP_DEFAULT_CAP_MB):
            return row
    return None


def scaling(configs: pd.DataFrame, *, workload: str) -> str:
    """'At 2 ranks bucketed keeps 72 % of linear scaling, stock 67 %.'"""
    rows = _largest_world(labelled(configs, workload=workload)).dropna(subset=["scaling_efficiency"])
    rows = rows[(rows["impl"] != "local") & (rows["world_size"] > 1)]
    if rows.empty:
        return ""
    ranked = rows.sort_values("scaling_efficiency", ascending=False)
    parts = [f"{r.label} {r.scaling_efficiency:.0%}" for r in ranked.itertuples()]
    return f"At {world_label(int(ranked['world_size'].iloc[0]))}, share of linear scaling kept: {', '.join(parts)}."


def communication(configs: pd.DataFrame, *, workload: str) -> str:
    """'At 2 ranks bucketed hides 42 % of its communication (76.4 ms per step), stock 36 % …; naive and flat none.'"""
    rows = _largest_world(labelled(configs, workload=workload))
    if "comm_ms" not in rows:
        return ""
    rows = rows[(rows["impl"] != "local") & (rows["comm_ms"].fillna(0) > 0)]
    if rows.empty:
        return ""
    ranked = rows.sort_values("overlap_efficiency", ascending=False)
    hiding = [r for r in ranked.itertuples() if r.overlap_efficiency >= 0.005]
    none = [r.label for r in ranked.itertuples() if r.overlap_efficiency < 0.005]
    world = world_label(int(ranked["world_size"].iloc[0]))
    said = [
        f"{r.label} hides {r.overlap_efficiency:.0%} of its communication ({r.comm_ms:.1f} ms per step)" for r in hiding
    ]
    if none:
        said.append(f"{' and '.join(none)} hide{'s' if len(none) == 1 else ''} none (they communicate after backward)")
    return f"At {world} " + "; ".join(said) + "."


def memory(configs: pd.DataFrame, *, workload: str) -> str:
    """'At 2 ranks the largest peak is stock's (1.2 GiB), the smallest fsdp's (0.4 GiB).'"""
    rows = _largest_world(labelled(configs, workload=workload))
    column = next((c for c in ("mem_peak_nvml_mb", "mem_peak_rss_mb") if c in rows and rows[c].notna().any()), None)
    if column is None:
        return ""
    rows = rows.dropna(subset=[column]).sort_values(column)
    what = "GPU memory (NVML)" if column == "mem_peak_nvml_mb" else "process memory (RSS)"
    low, high = rows.iloc[0], rows.iloc[-1]
    world = world_label(int(low["world_size"]))
    if low["label"] == high["label"]:
        return f"At {world} the peak {what} is {_mib(high[column])}."
    return (
        f"At {world} the largest peak {what} is {high['label']}'s ({_mib(high[column])}), "
        f"the smallest {low['label']}'s ({_mib(low[column])})."
    )


def _mib(value: float) -> str:
    return f"{value / 1024:.2f} GiB" if value >= 1024 else f"{value:.0f} MiB"
