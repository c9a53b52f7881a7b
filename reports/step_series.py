"""Pure reductions of a run's per-step rows (every rank's every step) into what the step figures draw: the
slowest rank's series, downsampled to a fixed number of points per configuration, and its quartiles; each
segment's mean over the slowest rank's measured steps; the bucket timeline of a typical step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.results.dictionary.columns import PHASE_COLUMNS as PHASES  # the step phases, as steps/ names them

MAX_SERIES_POINTS = 400  # per configuration and trace: enough to see warm-up and drift


def slowest_rank_series(steps: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and step, the slowest rank's step time (the time the job sees)."""
    if steps.empty:
        return pd.DataFrame(
            {
                "config_id": pd.Series(dtype=str),
                "step": pd.Series(dtype=int),
                "warmup": pd.Series(dtype=bool),
                "step_ms": pd.Series(dtype=float),
            }
        )
    grouped = steps.groupby(["config_id", "step"], observed=True, sort=True)
    return grouped.agg(warmup=("warmup", "any"), step_ms=("step_ms", "max")).reset_index()


SEGMENTS = ("forward_ms", "backward_ms", "exposed_comm_ms", "sync_ms", "optimizer_ms")
"""A step's stacked segments: the phases, with the measured communication that no compute hid taken
out of the phase it fell in (DDP waits for its buckets inside backward; naive, flat and bucketed in
sync; broadcasts of buffers in forward, ZeRO's of parameters in the optimizer step) and shown as its own
segment."""


def phase_means(steps: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, the mean of each segment (SEGMENTS) over the measured steps of its slowest
    rank (the rank with the longest mean step): the segments add up to that rank's mean step
    (`step_ms`, with the `rank`), which a median per segment would not. Where communication was not
    measured, exposed_comm_ms is null and the phases are whole. Exposed communication is taken out of the
    phase it was measured in (backward, forward, optimizer), the rest out of sync; for runs from before the
    forward and optimizer columns, what sync cannot hold out of forward."""
    measured = steps[~steps["warmup"]]
    if measured.empty:
        return pd.DataFrame(columns=["config_id", "rank", "step_ms", *SEGMENTS])
    per_rank = measured.groupby(["config_id", "rank"], observed=True)["step_ms"].mean().reset_index()
    slowest = per_rank.sort_values(["config_id", "step_ms", "rank"], ascending=[True, False, True], kind="stable")
    slowest = slowest.drop_duplicates("config_id")[["config_id", "rank"]]
    measured = measured.merge(slowest, on=["config_id", "rank"])
    exposed = measured.get("exposed_comm_ms", pd.Series(np.nan, index=measured.index)).astype(float)

    def part(column: str) -> pd.Series:
        return measured.get(column, pd.Series(np.nan, index=measured.index)).astype(float)

    in_backward, in_forward, in_optimizer = (part(f"exposed_{p}_ms") for p in ("backward", "forward", "optimizer"))
    in_phases = in_backward.fillna(0.0) + in_forward.fillna(0.0) + in_optimizer.fillna(0.0)
    sync_rest = measured["sync_ms"] - (exposed - in_phases).where(exposed.notna(), 0.0)
    # More exposed outside the phases measured than sync holds (a run without the forward column): the rest
    # waited in forward (FSDP's all-gathers do).
    spill = (-sync_rest).clip(lower=0.0) + in_forward.fillna(0.0)
    segments = pd.DataFrame({
        "config_id": measured["config_id"],
        "rank": measured["rank"],
        "step_ms": measured["step_ms"],
        "forward_ms": measured["forward_ms"] - spill,
        "backward_ms": measured["backward_ms"] - in_backward.fillna(0.0),
        "exposed_comm_ms": exposed,
        "sync_ms": sync_rest.clip(lower=0.0),
        "optimizer_ms": measured["optimizer_ms"] - in_optimizer.fillna(0.0),
    })  # fmt: skip
    grouped = segments.groupby(["config_id", "rank"], observed=True)[["step_ms", *SEGMENTS]]
    # A step without a communication figure leaves the mean unknown (null), not smaller.
    incomplete = grouped.count().lt(grouped.size(), axis=0)
    return grouped.mean().mask(incomplete).reset_index()


def typical_step_timeline(timeline: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, every rank's bucket timeline in rank 0's median measured step (the one whose step time is
    the median), each rank with its own phase times in that step (each on its own step's clock): what one ordinary
    step looked like, and how long one rank's collectives waited for another's."""
    if timeline.empty:
        return pd.DataFrame()
    measured = steps[(~steps["warmup"]) & (steps["rank"] == 0) & steps["config_id"].isin(timeline["config_id"])]
    chosen = []
    for _, group in measured.groupby("config_id", observed=True):
        ordered = group.sort_values("step_ms")
        chosen.append(ordered.iloc[(len(ordered) - 1) // 2])
    if not chosen:
        return pd.DataFrame()
    typical = pd.DataFrame(chosen)[["config_id", "step"]]
    phases = steps.merge(typical, on=["config_id", "step"])[["config_id", "rank", "step", *PHASES]]
    rows = timeline.merge(phases, on=["config_id", "rank", "step"])
    return rows.sort_values(["config_id", "rank", "launched_ms", "bucket"]).reset_index(
        drop=True
    )  # broadcasts in place


def box_stats(series: pd.DataFrame) -> pd.DataFrame:
    """Quartiles and extremes of the measured slowest-rank step times, per configuration."""
    measured = series[~series["warmup"]]
    if measured.empty:
        return pd.DataFrame(columns=["config_id", "min", "q1", "median", "q3", "max"])
    grouped = measured.groupby("config_id", observed=True)["step_ms"]
    quantiles = grouped.quantile([0.0, 0.25, 0.5, 0.75, 1.0]).unstack()
    quantiles.columns = ["min", "q1", "median", "q3", "max"]
    return quantiles.reset_index()


def downsample(series: pd.DataFrame, *, max_points: int = MAX_SERIES_POINTS) -> pd.DataFrame:
    """At most `max_points` measured points per configuration (median of consecutive steps per bin).

    Warm-up steps are few and are what the series is for, so they are all kept. One group-by
    over every configuration at once: a loop per configuration cost seconds at a million rows.
    """
    warmup, measured = series[series["warmup"]], series[~series["warmup"]]
    by_config = measured.groupby("config_id", observed=True, sort=False)
    position = by_config.cumcount().to_numpy()
    count = by_config["step"].transform("size").to_numpy()
    bins = np.where(count > max_points, position * max_points // np.maximum(count, 1), position)
    binned = (
        measured.assign(bin=bins)
        .groupby(["config_id", "bin"], observed=True, sort=False)
        .agg(step=("step", "median"), step_ms=("step_ms", "median"))
        .reset_index()
        .drop(columns="bin")
        .assign(warmup=False)
    )
    return pd.concat([warmup, binned], ignore_index=True).sort_values(["config_id", "step"], kind="stable")
