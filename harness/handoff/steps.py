"""One configuration's per-step rows, from every rank's result: the phases, the communication, the
parts of the step (harness.analysis.gap) and how late each rank launched; and the configuration's
figures made from them: the communication means, the gap over the baseline, the slowest rank.

Pure functions: rank 0 calls them (through records.assemble) with what it gathered.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import gap, overlap
from harness.config.grid import Configuration
from harness.handoff.rank_result import RankResult
from harness.results.dictionary.columns import PHASES

COMM_STEP_COLUMNS = ("comm_ms", "exposed_comm_ms", "exposed_backward_ms", "exposed_forward_ms", "exposed_optimizer_ms")
PART_STEP_COLUMNS = ("compute_ms", "waiting_ms", "rest_ms", "late_by_ms")


def step_rows(cfg: Configuration, run_id: str, results: list[RankResult]) -> list[dict[str, Any]]:
    """One row per rank and step: its phases and, where the strategy's collectives were timed, its
    communication (harness.analysis.overlap) and the parts of its step (harness.analysis.gap)."""
    timed = all(r.comm is not None for r in results if r.steps)
    waits = gap.waits_per_rank([r.comm or [] for r in results if r.steps]) if timed else []
    rows = []
    for rank, result in enumerate(results):
        by_step: dict[int, list[dict[str, Any]]] = {}
        for collective in result.comm or []:
            by_step.setdefault(collective["step"], []).append(collective)
        for step, timing in enumerate(result.steps):
            row = {"run_id": run_id, "config_id": cfg.config_id, "rank": rank, "step": step,
                   "warmup": step < cfg.warmup, "step_ms": timing["step_ms"],
                   **{f"{phase}_ms": timing.get(f"{phase}_ms") for phase in PHASES}}  # fmt: skip
            if result.comm is None:
                row.update(dict.fromkeys(COMM_STEP_COLUMNS + PART_STEP_COLUMNS))
            else:
                collectives = by_step.get(step, [])
                own = {key[1:]: wait for key, wait in waits[rank].items() if key[0] == step} if waits else {}
                row.update(overlap.step_communication(timing, collectives))
                row.update({k: v for k, v in gap.step_parts(timing, collectives, own).items()
                            if k != "exposed_comm_ms"})  # fmt: skip
                row["late_by_ms"] = _late_by(waits, rank, step) if waits else None
            rows.append(row)
    return rows


def _late_by(waits: list[dict[tuple[int, int, int], float]], rank: int, step: int) -> float:
    """How much later this rank launched its collectives of `step` than the earliest rank (the most,
    over its collectives): the longest any rank waited for it, less its own wait."""
    late = [max(w[key] for w in waits) - waits[rank][key] for key in waits[rank] if key[0] == step]
    return max(late, default=0.0)


def communication_columns(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Measured communication over the measured steps of every rank: the mean per step of
    communication and of exposed communication, and the overlap efficiency of their totals (so
    that overlap_efficiency = 1 − exposed_comm_ms / comm_ms exactly, as a reader checks it; the
    steps table keeps each step's figures). Null when the strategy's collectives were not timed."""
    measured = [row for row in steps if not row["warmup"] and row.get("comm_ms") is not None]
    if not measured:
        return dict.fromkeys(("comm_ms", "exposed_comm_ms", "overlap_efficiency", *EXPOSED_OUTSIDE_BACKWARD))
    comm = [row["comm_ms"] for row in measured]
    exposed = [row["exposed_comm_ms"] for row in measured]
    return {
        "comm_ms": float(np.mean(comm)),
        "exposed_comm_ms": float(np.mean(exposed)),
        "overlap_efficiency": overlap.overlap_efficiency(comm, exposed),
        **{name: _mean_of(measured, name) for name in EXPOSED_OUTSIDE_BACKWARD},
    }


EXPOSED_OUTSIDE_BACKWARD = ("exposed_forward_ms", "exposed_optimizer_ms")
"""The parts of a configuration's exposed communication in forward (a broadcast of buffers, FSDP's all-gathers)
and in the optimizer step (ZeRO's broadcast of parameters), ms a step: what the why-line names besides buckets."""


def _mean_of(rows: list[dict[str, Any]], name: str) -> float | None:
    values = [row[name] for row in rows if row.get(name) is not None]
    return float(np.mean(values)) if values else None


def slowest_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per measured step, the row of the slowest rank (whose step is the step time)."""
    slowest: dict[int, dict[str, Any]] = {}
    for row in steps:
        if not row["warmup"] and (row["step"] not in slowest or row["step_ms"] > slowest[row["step"]]["step_ms"]):
            slowest[row["step"]] = row
    return [slowest[step] for step in sorted(slowest)]


def part_columns(cfg: Configuration, steps: list[dict[str, Any]], baseline: dict[str, float] | None) -> dict:
    """The configuration's mean step (the slowest rank per step), its mean compute and its gap over the
    baseline taken apart as the rank that waited most sees them (gap.waiting_view; null without a
    timeline, at world size 1, and for the baseline itself), the slowest rank where there is one, and the
    rank last most often, named or not."""
    slowest = slowest_steps(steps)
    view = gap.waiting_view(steps)
    timed = bool(view) and all(row.get("compute_ms") is not None for row in view)
    step_ms = float(np.mean([r["step_ms"] for r in slowest])) if slowest else None
    row: dict[str, Any] = {
        "step_ms_mean": step_ms,
        "compute_ms": float(np.mean([r["compute_ms"] for r in view])) if timed else None,
    }
    communicating = cfg.world_size > 1 and timed
    row.update(gap.decompose(view, baseline, step_ms=step_ms) if communicating else gap.decompose([], None))
    late = {}
    for step_row in steps:
        lateness = step_row.get("late_by_ms")
        if not step_row["warmup"] and lateness and lateness > late.get(step_row["step"], (None, 0.0))[1]:
            late[step_row["step"]] = (step_row["rank"], lateness)
    median = float(np.median([r["step_ms"] for r in slowest])) if slowest else 0.0
    row.update(gap.slowest_rank(late, median, world_size=cfg.world_size) if communicating else
               gap.slowest_rank({}, 0.0, world_size=1))  # fmt: skip
    row.update(gap.last_rank(late if communicating else {}, world_size=cfg.world_size))
    return row


def baseline_means(written: pd.DataFrame, same: pd.Series, cfg: Configuration) -> dict[str, float] | None:
    """The baseline's mean step and compute at this world size, nodes and setup (the same repeat where
    there is one), from the rows already written."""
    if written.empty or "step_ms_mean" not in written or not same.any():
        return None
    rows = written[same & written["baseline"].fillna(False).astype(bool) & (written["world_size"] == cfg.world_size)
                   & (written["nnodes"] == cfg.nnodes)]  # fmt: skip
    if "repeat" in rows and (rows["repeat"] == cfg.repeat).any():
        rows = rows[rows["repeat"] == cfg.repeat]
    if rows.empty or pd.isna(rows["step_ms_mean"].iloc[-1]) or pd.isna(rows["compute_ms"].iloc[-1]):
        return None
    return {"step_ms": float(rows["step_ms_mean"].iloc[-1]), "compute_ms": float(rows["compute_ms"].iloc[-1])}


def message_bytes(timeline: list[dict[str, Any]]) -> float | None:
    """`comm_bytes`: the sizes of a rank's collectives' messages a measured step (the timeline's `bytes`), the mean
    over steps and ranks (what a compression hook saves shows here, where gloo's ms barely move); None without a
    timeline."""
    sizes: dict[tuple[int, int], int] = {}
    for row in timeline:
        if not row["warmup"] and row.get("bytes") is not None:
            sizes[row["rank"], row["step"]] = sizes.get((row["rank"], row["step"]), 0) + int(row["bytes"])
    return float(np.mean(list(sizes.values()))) if sizes else None


def timeline_rows(cfg: Configuration, run_id: str, results: list[RankResult]) -> list[dict[str, Any]]:
    """The bucket timeline: one row per collective, rank and step."""
    rows = []
    for rank, result in enumerate(results):
        for collective in result.comm or []:
            ids = {"run_id": run_id, "config_id": cfg.config_id, "rank": rank}
            rows.append({**ids, **collective, "warmup": collective["step"] < cfg.warmup})
    return rows
