"""The run page's answer, before any figure: per workload and world size, the strategies ranked by
step time, each against stock (DDP's default), with the recommended bucket cap, parity and a noise
flag; then a one-line headline per world size. Pure: DataFrames in, HTML out.

Columns a run does not have (older schemas, or a run made before a column existed) show as "—".
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import stats
from reports.aggregate import RunData, strategy_label, world_label
from reports.html import esc, table

REFERENCE = "stock"  # DDP as shipped: what every strategy is measured against
FLOOR = "local"  # no communication at all: the floor, listed last, never "the fastest strategy"
NOISY_CV = 0.1  # a step CV above this: differences of a few per cent may be chance
MISSING = "—"


def value(row: pd.Series | dict, column: str) -> Any:
    """The row's value, or None where the column is absent or null."""
    got = row.get(column) if hasattr(row, "get") else None
    if got is None or (isinstance(got, float) and np.isnan(got)) or got is pd.NA:
        return None
    return got


def milliseconds(ms: float | None) -> str:
    if ms is None:
        return MISSING
    return f"{ms:.1f} ms" if ms >= 100 else f"{ms:.2f} ms"


def ranked(configs: pd.DataFrame, *, workload: str) -> pd.DataFrame:
    """One row per world size × strategy (its options included; repeats pooled), fastest first.

    `repeat_ms` keeps each repeat's median, the evidence an interval is built from."""
    rows = configs[(configs["workload"] == workload) & (configs["status"] == "ok")]
    rows = rows.dropna(subset=["step_ms_median"])
    if rows.empty:
        return pd.DataFrame()
    rows = rows.assign(strategy=[strategy_label(i, o) for i, o in zip(rows["impl"], rows["impl_options"], strict=True)])
    pooled = []
    for (world, strategy), group in rows.groupby(["world_size", "strategy"], sort=False):
        first = group.iloc[0]
        parity = [value(r, "parity_ok") for _, r in group.iterrows()]
        cvs = [v for v in (value(r, "step_ms_cv") for _, r in group.iterrows()) if v is not None]
        pooled.append({
            "world_size": int(world), "strategy": strategy, "impl": first["impl"],
            "options": _options(first["impl_options"]), "bucket_cap_mb": value(first, "bucket_cap_mb"),
            "step_ms": float(np.median(group["step_ms_median"])), "repeat_ms": group["step_ms_median"].tolist(),
            "cv": max(cvs) if cvs else None,
            "parity_ok": False if False in parity else (True if parity and all(parity) else None),
            # Overlap as measured (1 − exposed / communication) exists only where communication was measured.
            "overlap_efficiency": value(first, "overlap_efficiency") if value(first, "comm_ms") else None,
        })  # fmt: skip
    frame = pd.DataFrame(pooled).astype({"bucket_cap_mb": object, "cv": object, "overlap_efficiency": object})
    frame = frame.where(frame.notna(), None)  # None, not NaN: "missing" reads the same in every cell
    frame["is_floor"] = frame["impl"] == FLOOR
    return frame.sort_values(["world_size", "is_floor", "step_ms"], kind="stable").reset_index(drop=True)


def _options(impl_options: Any) -> dict:
    if isinstance(impl_options, dict):
        return impl_options
    return json.loads(impl_options) if isinstance(impl_options, str) and impl_options else {}


def reference_row(group: pd.DataFrame) -> pd.Series | None:
    """Stock as DDP ships it: no option but (at most) the default cap."""
    for _, row in group[group["impl"] == REFERENCE].iterrows():
        others = {k: v for k, v in row["options"].items() if k != "bucket_cap_mb"}
        cap = row["bucket_cap_mb"] if row["bucket_cap_mb"] is not None else row["options"].get("bucket_cap_mb")
        if not others and (cap is None or float(cap) == stats.DDP_DEFAULT_CAP_MB):
            return row
    return None


def against_reference(row: pd.Series, reference: pd.Series | None) -> str:
    """'1.24× faster (1.20–1.28)': stock's time over this one's, with the repeats' interval where the
    analysis layer gives one (two repeats a side at least)."""
    if reference is None:
        return MISSING
    if row["strategy"] == reference["strategy"]:
        return "reference"
    speedup = reference["step_ms"] / row["step_ms"]
    text = f"{speedup:.2f}× faster" if speedup >= 1 else f"{1 / speedup:.2f}× slower"
    interval = getattr(stats, "ratio_interval", None)  # the repeat-level interval (harness.analysis.stats)
    if interval is not None and min(len(row["repeat_ms"]), len(reference["repeat_ms"])) >= 2:
        ratio = interval(reference["repeat_ms"], row["repeat_ms"])  # new / base step time
        if np.isfinite(ratio["low"]) and np.isfinite(ratio["high"]):
            low, high = sorted((1 / ratio["high"], 1 / ratio["low"]))
            text += f" ({low:.2f}–{high:.2f})" if speedup >= 1 else f" ({1 / high:.2f}–{1 / low:.2f})"
    return text


def recommendation_text(recommendations: pd.DataFrame, *, workload: str, impl: str, world: int) -> str | None:
    """The sweep's verdict for one strategy at one world size: '5 MiB', 'flat: any of 1, 5, 25 MiB', or None."""
    if world == 1:
        return None
    if recommendations.empty or "impl" not in recommendations:
        return None
    rows = recommendations[(recommendations["impl"] == impl) & (recommendations["workload"] == workload)
                           & (recommendations["world_size"] == world)]  # fmt: skip
    if rows.empty:
        return None
    row = rows.iloc[0]
    for column in ("recommendation", "verdict_text"):  # a verdict the analysis layer words itself
        if isinstance(value(row, column), str):
            return row[column]
    if isinstance(value(row, "decision"), str):  # the sweep's decision over repeats (docs/statistics.md)
        from harness.analysis import sweep

        return sweep.answer(row)
    best = value(row, "best_cap_mb")
    as_good = _caps(value(row, "equivalent_caps_mb"))
    if best is None:
        return None
    if (
        len(as_good) > 1 and stats.DDP_DEFAULT_CAP_MB in as_good
    ):  # the default is as good as the best: nothing to change
        return "flat: any of " + ", ".join(f"{c:g}" for c in as_good) + " MiB"
    return f"{best:g} MiB"


def _caps(text: Any) -> list[float]:
    if text is None:
        return []
    caps = json.loads(text) if isinstance(text, str) else list(text)
    return sorted(float(c) for c in caps)


def parity_cell(ok: bool | None) -> str:
    return {True: "ok", False: "<b>FAILED</b>"}.get(ok, "not judged")


def noise_cell(cv: float | None) -> str:
    if cv is None:
        return MISSING
    return f"<b>noisy</b> (cv {cv:.2f})" if cv > NOISY_CV else f"steady (cv {cv:.2f})"


def world_table(group: pd.DataFrame, recommendations: pd.DataFrame, *, workload: str) -> str:
    reference = reference_row(group)
    rows, classes, shown_caps = [], [], set()
    rank = 0
    for _, row in group.iterrows():
        rank += not row["is_floor"]
        cap = MISSING
        if row["impl"] not in shown_caps:  # the verdict once per strategy, on its fastest row
            shown_caps.add(row["impl"])
            cap = esc(recommendation_text(recommendations, workload=workload, impl=row["impl"],
                                          world=int(row["world_size"])) or MISSING)  # fmt: skip
        overlap = row["overlap_efficiency"]
        rows.append([
            "floor" if row["is_floor"] else str(rank),
            f"<b>{esc(row['strategy'])}</b>" if rank == 1 and not row["is_floor"] else esc(row["strategy"]),
            milliseconds(row["step_ms"]), esc(against_reference(row, reference)), cap,
            MISSING if overlap is None else f"{overlap:.0%}", parity_cell(row["parity_ok"]), noise_cell(row["cv"]),
        ])  # fmt: skip
        classes.append("failed" if row["parity_ok"] is False else ("noisy" if (row["cv"] or 0) > NOISY_CV else ""))
    head = ["#", "strategy", "step (median)", "vs stock", "bucket cap to use", "comm. hidden", "parity", "noise"]
    return table(head, rows, row_classes=classes)


def headline(group: pd.DataFrame) -> str:
    """'At 2 ranks: bucketed bucket_cap_mb=1 is fastest, 3.10 ms, 1.24× faster than stock; parity ok.'"""
    contenders = group[~group["is_floor"]]
    if contenders.empty:
        return f"At {world_label(int(group['world_size'].iloc[0]))}: only the no-communication floor was measured."
    best = contenders.iloc[0]
    reference = reference_row(group)
    versus = against_reference(best, reference)
    versus = "" if versus in (MISSING, "reference") else f", {versus.split(' (')[0]} than stock"
    parity = {True: "parity ok", False: "PARITY FAILED", None: "parity not judged"}[best["parity_ok"]]
    noisy = "; noisy" if (best["cv"] or 0) > NOISY_CV else ""
    return (f"At {world_label(int(best['world_size']))}: <b>{esc(best['strategy'])}</b> is fastest, "
            f"{milliseconds(best['step_ms'])}{esc(versus)}; {parity}{noisy}.")  # fmt: skip


def answer_section(run: RunData, workloads: list[str]) -> str:
    parts = ["<h2 id=answer>The answer</h2>"]
    for workload in workloads:
        frame = ranked(run.configs, workload=workload)
        if frame.empty:
            continue
        size = run.configs.loc[run.configs["workload"] == workload, "size"].dropna()
        parts.append(f"<h3>{esc(workload)}{esc('/' + str(size.iloc[0])) if len(size) else ''}</h3>")
        for _, group in frame.groupby("world_size", sort=True):
            parts.append(f"<p class=headline>{headline(group)}</p>")
            parts.append(world_table(group, run.recommendations, workload=workload))
    if len(parts) == 1:
        parts.append("<p>No configuration of this run was measured: nothing to rank.</p>")
    parts.append(
        "<p class=caption>Ranked by median step time (slowest rank per step). 'vs stock' compares with DDP as "
        "shipped (default bucket cap); its interval needs two repeats a side (--repeats). 'comm. hidden' is "
        "the share of communication that overlapped compute. 'floor' is local: every rank trains alone, no "
        "communication; no strategy can beat it. Noisy: step CV above 0.1.</p>"
    )
    return "\n".join(parts)
