"""Bucket-cap sweeps: from a run's rows to a recommended `bucket_cap_mb` per strategy and world size.

Pure: DataFrames in, a DataFrame out; `write_run_recommendations` alone reads a run and writes the
result next to it (`recommendations.parquet`), which the report and `predict` show.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

import impls
from harness.analysis import stats
from harness.results import store

GROUP_KEYS = ("impl", "other_options", "workload", "size", "batch_size", "dtype", "optimizer", "world_size", "nnodes")


def _other_options(options_json: str) -> str:
    options = json.loads(options_json or "{}")
    options.pop("bucket_cap_mb", None)
    return json.dumps(options, sort_keys=True)


def step_samples(configs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and measured step: the slowest rank's time, with the configuration's keys."""
    measured = steps[~steps["warmup"]]
    slowest = measured.groupby(["config_id", "step"], as_index=False)["step_ms"].max()
    keys = configs[configs["status"] == "ok"].assign(other_options=lambda c: c["impl_options"].map(_other_options))
    return slowest.merge(keys[["config_id", "bucket_cap_mb", *GROUP_KEYS]], on="config_id")


def recommendations(configs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One row per strategy × setup × world size that was measured at two or more bucket caps."""
    if configs.empty or steps.empty:
        return pd.DataFrame()
    samples = step_samples(configs, steps).dropna(subset=["bucket_cap_mb"])
    rows = []
    for keys, group in samples.groupby(list(GROUP_KEYS), dropna=False):  # a null key (older rows) is a key too
        by_cap = {float(cap): g["step_ms"].tolist() for cap, g in group.groupby("bucket_cap_mb")}
        if len(by_cap) < 2:
            continue
        best = stats.recommend_cap(by_cap)
        best["equivalent_caps_mb"] = json.dumps(best["equivalent_caps_mb"])
        rows.append({**dict(zip(GROUP_KEYS, keys, strict=True)), "caps_mb": json.dumps(sorted(by_cap)), **best})
    return pd.DataFrame(rows)


def describe(row: pd.Series) -> str:
    """One line a person reads: the cap to use, how sure, how flat, and what it gains over 25 MB."""
    gain = "" if pd.isna(row["gain_vs_default"]) else f", {row['gain_vs_default']:+.1%} vs 25 MB"
    return (
        f"w{row['world_size']} {row['workload']}/{row['size']} {row['impl']}: use bucket_cap_mb={row['best_cap_mb']:g} "
        f"({row['best_step_ms']:.2f} ms, 95% CI {row['best_ci_low_ms']:.2f}–{row['best_ci_high_ms']:.2f}; "
        f"as good: {', '.join(f'{c:g}' for c in json.loads(row['equivalent_caps_mb']))}{gain})"
    )


def write_run_recommendations(run: Path) -> pd.DataFrame:
    """A finished run's recommendations, written next to it when it swept bucket caps (else empty)."""
    frame = recommendations(store.read_configs(run), store.read_steps(run))
    if not frame.empty:
        store.write_recommendations(run, frame)
    return frame


def as_good_caps(table: pd.DataFrame, *, workload: str, size: str, world: int) -> list[float] | None:
    """The caps the stock sweep found not significantly slower than its best, where it has them."""
    if table.empty:
        return None
    rows = table[(table["impl"] == impls.reference_name()) & (table["workload"] == workload)
                 & (table["size"] == size) & (table["world_size"] == world)]  # fmt: skip
    return json.loads(rows["equivalent_caps_mb"].iloc[0]) if len(rows) == 1 else None
