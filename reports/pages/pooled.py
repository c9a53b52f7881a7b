"""The answer's rows: per workload, one row per world size × strategy (its options included), its repeats pooled
(the geometric mean of their medians, every ratio's estimate; communication, overlap, noise, parity and memory peaks
over the repeats), fastest first with the no-communication floor last. Pure: DataFrames in, DataFrames out.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import roles, stats
from harness.analysis.overlap import overlap_efficiency
from harness.analysis.scaling import pooled_scaling_per_row
from harness.analysis.verdicts import decide
from harness.perfmodel.memory import HELD
from harness.results.values import options_of, strategy_labels
from reports.pages import alerts
from reports.pages.evidence import bucket_layouts, repeat_ids
from reports.pages.notes import hidden

MISSING = "—"
MEMORY_PEAKS = ("mem_peak_nvml_mb", "mem_peak_rss_mb")
HELD_COLUMNS = tuple(HELD)  # parameters, gradients, optimizer state (harness.perfmodel.memory)
GRAD_VIEW = "held_grad_view_mb"  # of the gradients, those that are views into the strategy's buckets
HELD_STATE = "held_state_mb"  # their sum, per rank: what a sharded strategy shrinks, measured on any device
PROCESS_PEAK = "mem_peak_nvml_process_mb"  # each rank's own, where ranks share a GPU (alerts.gpu_shared_worlds)
PARITY = ("parity_note", "parity_max_abs_diff", "parity_tolerance")  # the farthest repeat's: values.parity_words
POOLED_COLUMNS = ("parity_ok", *PARITY, "step_ms_cv", "comm_ms", "comm_bytes", "exposed_comm_ms", *MEMORY_PEAKS,
                  PROCESS_PEAK, *HELD_COLUMNS, GRAD_VIEW, "activation_mb")  # fmt: skip
"""The columns `_pool` reads row by row (the rest it reads from the group's first row or its columns)."""


def value(row: pd.Series | dict, column: str) -> Any:
    """The row's value, or None where the column is absent or null."""
    got = row.get(column) if hasattr(row, "get") else None
    if got is None or (isinstance(got, float) and np.isnan(got)) or got is pd.NA:
        return None
    return got


def run_confidence(meta: dict) -> float:
    """The confidence of the run's intervals: its verdicts' (decide.confidence_for), so that the answer calls
    nothing significant that the run's own rule has not (99.5 % a look under --repeats auto, else 95 %)."""
    config = meta.get("config") or {}
    return decide.confidence_for(config.get("repeats"), int(config.get("max_repeats") or decide.DEFAULT_MAX_REPEATS))


_KEPT: list[tuple[pd.DataFrame, str, pd.DataFrame]] | None = None
"""Within `kept_while`: each workload's rows as `_ranked` pooled them, by the very frame they came from."""


@contextlib.contextmanager
def kept_while():
    """While one run's pages are built from configs nobody changes (reports.site.write_run): `ranked` pools each
    workload's rows once, not once for each section and takeaway that asks (7 times for one workload: a third of a
    run page's time, most of it the pooled scaling)."""
    global _KEPT
    outer, _KEPT = _KEPT, []
    try:
        yield
    finally:
        _KEPT = outer


def ranked(configs: pd.DataFrame, *, workload: str, confidence: float = stats.CONFIDENCE) -> pd.DataFrame:
    """One row per world size × strategy (its options included; repeats pooled), fastest first.

    `step_ms` is the geometric mean of the repeats' medians (the estimate every ratio, verdict and the
    sweep's cap are built around: stats.center_interval); `repeat_ms` keeps each repeat's median, the
    evidence an interval is built from, at `confidence` (run_confidence; 95 % at one rank, which --repeats
    auto never judges), kept on every row. Everything else is pooled over the repeats too (_pool)."""
    if _KEPT is None:
        frame = _ranked(configs, workload)
    else:
        frame = next((f for c, w, f in _KEPT if c is configs and w == workload), None)
        if frame is None:
            frame = _ranked(configs, workload)
            _KEPT.append((configs, workload, frame))  # the frame held: its id is not reused while kept
        frame = frame.copy()
    if frame.empty:
        return frame
    # At one rank, which --repeats auto never judges, the page's look is the only one: its interval is one look's 95 %.
    frame["confidence"] = [confidence if world > 1 else stats.CONFIDENCE for world in frame["world_size"]]
    return frame


def _ranked(configs: pd.DataFrame, workload: str) -> pd.DataFrame:
    rows = roles.with_roles(configs[(configs["workload"] == workload) & (configs["status"] == "ok")])
    rows = rows.dropna(subset=["step_ms_median"])
    if rows.empty:
        return pd.DataFrame()
    scaling = pooled_scaling_per_row(configs[configs["workload"] == workload], rows)
    rows = rows.assign(strategy=strategy_labels(rows), pooled_scaling=scaling["scaling_efficiency"],
                       pooled_scaling_vs_local=scaling["scaling_efficiency_vs_local"])  # fmt: skip
    pooled = [_pool(world, strategy, group) for (world, strategy), group in rows.groupby(["world_size", "strategy"],
                                                                                          sort=False)]  # fmt: skip
    frame = pd.DataFrame(pooled).astype(object)
    frame = frame.where(frame.notna(), None)  # None, not NaN: "missing" reads the same in every cell
    frame["step_ms"] = frame["step_ms"].astype(float)
    # The baseline (no communication) is the floor: listed last, never "the fastest strategy".
    frame["is_floor"] = frame["baseline"].astype(bool)
    return frame.sort_values(["world_size", "is_floor", "step_ms"], kind="stable").reset_index(drop=True)


def _one(values: list[float | None]) -> float | None:
    """The one figure every row of a strategy shares (rows of one setup share one); None where its rows are
    of several setups, with different figures or a figure for some only (no one figure is theirs)."""
    figures = {None if v is None or pd.isna(v) else float(v) for v in values}
    return figures.pop() if len(figures) == 1 else None


def _pool(world: int, strategy: str, group: pd.DataFrame) -> dict:
    """One strategy's repeats as one row: the geometric mean of the repeats' medians (step), the weak scaling pooled
    over repeats (scaling.pooled_scaling), the noise as alerts.rows_noise_note judges it (median step CV over
    repeats; repeats that disagree; steps that drift), communication as the mean per step over repeats and its
    overlap as a ratio of totals, memory peaks as the highest."""
    first = group.iloc[0]
    records = group[[c for c in POOLED_COLUMNS if c in group]].to_dict("records")  # the rest: 4× the time, unread
    parity = [value(r, "parity_ok") for r in records]
    differed = [r for r in records if value(r, "parity_max_abs_diff") is not None]
    farthest = max(differed, key=lambda r: float(r["parity_max_abs_diff"])) if differed else {}
    known_cvs = [cv for r in records if (cv := value(r, "step_ms_cv")) is not None]
    medians = [float(m) for m in group["step_ms_median"]]
    timed = [r for r in records if value(r, "comm_ms") is not None and value(r, "exposed_comm_ms") is not None]
    comm = [float(r["comm_ms"]) for r in timed]
    exposed = [float(r["exposed_comm_ms"]) for r in timed]
    sent = [float(r["comm_bytes"]) for r in timed if value(r, "comm_bytes") is not None]
    return {
        "world_size": int(world), "strategy": strategy, "impl": first["impl"],
        **{role: first[role] for role in roles.ROLES},
        "options": options_of(first["impl_options"]), "bucket_cap_mb": value(first, "bucket_cap_mb"),
        "first_bucket_cap_mb": value(first, "first_bucket_cap_mb"),
        "step_ms": stats.geometric_mean(medians), "repeat_ms": medians, "repeats": len(medians),
        "repeat_ids": repeat_ids(group), "config_ids": frozenset(group.get("config_id", ())),  # decide's
        "bucket_layouts": bucket_layouts(group),
        "cv": float(np.median(known_cvs)) if known_cvs else None, "noise": alerts.rows_noise_note(group),
        # Judged on one repeat of a configuration (the others' rows say which): ok where what was judged passed.
        "parity_ok": False if False in parity else (True if True in parity else None),
        **{column: value(farthest, column) for column in PARITY},
        "comm_ms": float(np.mean(comm)) if comm else None,
        "exposed_comm_ms": float(np.mean(exposed)) if exposed else None,
        "comm_bytes": float(np.mean(sent)) if sent else None,  # a compression hook's saving, where timed
        # Measured overlap: 1 − Σ exposed / Σ communication over the repeats (each repeat's per-step means).
        "overlap_efficiency": overlap_efficiency(comm, exposed),
        "backend": value(first, "backend"), "comm_late": hidden.completions_late(group),  # hidden.hidden_cell's
        "hidden_low": hidden.hidden_at_least(group),
        "scaling_efficiency": _one(list(group["pooled_scaling"])),
        "scaling_efficiency_vs_local": _one(list(group["pooled_scaling_vs_local"])),
        **{column: _highest([value(r, column) for r in records]) for column in (*MEMORY_PEAKS, PROCESS_PEAK)},
        HELD_STATE: _highest([_held_state(r) for r in records]),
        GRAD_VIEW: _highest([value(r, GRAD_VIEW) for r in records]),
        "activation_mb": _highest([value(r, "activation_mb") for r in records]),  # the model's, at the batch
    }  # fmt: skip


def _held_state(record: dict) -> float | None:
    """Parameters, gradients and optimizer state a rank held after its last step (MiB), where all three are known."""
    held = [value(record, column) for column in HELD_COLUMNS]
    return None if None in held else float(sum(held))


def _highest(values: list[Any]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return max(known) if known else None
