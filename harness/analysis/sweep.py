"""Bucket-cap sweeps: from a run's rows to a recommended `bucket_cap_mb` per strategy and world size.

The evidence per cap is its repeats (each repeat's median step); a cap is recommended only when it
beats DDP's default significantly, else the optimum is 'flat: any of …', or there were too few
repeats to tell (docs/statistics.md). Nothing is recommended where nothing communicates: world
size 1 and the `local` baseline.

Pure: DataFrames in, a DataFrame out; `write_run_recommendations` alone reads a run and writes the
result next to it (`recommendations.parquet`), which the report and `predict` show.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

import impls
from harness.analysis import stats
from harness.plan.config import BASELINE_IMPL
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


def _communicates(keys: dict) -> bool:
    return keys["world_size"] * keys["nnodes"] > 1 and keys["impl"] != BASELINE_IMPL


def recommendations(configs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One row per communicating strategy × setup × world size measured at two or more bucket caps."""
    if configs.empty or steps.empty:
        return pd.DataFrame()
    samples = step_samples(configs, steps).dropna(subset=["bucket_cap_mb"])
    rows = []
    for keys, group in samples.groupby(list(GROUP_KEYS), dropna=False):  # a null key (older rows) is a key too
        setup = dict(zip(GROUP_KEYS, keys, strict=True))
        by_cap = {float(cap): g for cap, g in group.groupby("bucket_cap_mb")}
        if len(by_cap) < 2 or not _communicates(setup):
            continue
        repeats = {cap: [stats.repeat_summary(r.sort_values("step")["step_ms"]) for _, r in g.groupby("config_id")]
                   for cap, g in by_cap.items()}  # fmt: skip
        best = stats.recommend_cap({cap: [r["median_ms"] for r in reps] for cap, reps in repeats.items()})
        best["equivalent_caps_mb"] = json.dumps(best["equivalent_caps_mb"])
        rows.append({**setup, "caps_mb": json.dumps(sorted(by_cap)), **best, "noise": _noise(repeats)})
    return pd.DataFrame(rows)


def _noise(repeats: dict[float, list[dict]]) -> str:
    """The caps whose steps are noisy or whose repeats disagree, and why ('' when none)."""
    notes = {
        cap: stats.noise_note([r["cv"] for r in reps], [r["median_ms"] for r in reps]) for cap, reps in repeats.items()
    }
    return "; ".join(f"cap {cap:g}: {note}" for cap, note in sorted(notes.items()) if note)


def answer(row: pd.Series) -> str:
    """The decision in words, for the console and the run page: the cap to use, or 'flat: any of …',
    or 'too few repeats to tell (have N, need about M)'."""
    as_good = ", ".join(f"{c:g}" for c in json.loads(row["equivalent_caps_mb"]))
    if pd.isna(row.get("decision")):  # written before decisions were made: the fastest, no verdict
        return f"fastest: {row['best_cap_mb']:g} MiB (no verdict recorded: a run from before repeats were judged)"
    if row["decision"] == stats.RECOMMEND:
        return f"use bucket_cap_mb={row['best_cap_mb']:g}"
    if row["decision"] == stats.FLAT:
        return f"flat: any of {as_good} MiB"
    return f"too few repeats to tell (have {row['repeats']}, {stats.needed_text(row['repeats_needed'])})"


def describe(row: pd.Series) -> str:
    """One line a person reads: the decision, the fastest cap and how sure, what it gains over 25 MiB, the noise."""
    gain = "" if pd.isna(row["gain_vs_default"]) else f", {row['gain_vs_default']:+.1%} vs 25 MiB"
    interval = (
        "" if pd.isna(row["best_ci_low_ms"]) else f", 95% CI {row['best_ci_low_ms']:.2f}–{row['best_ci_high_ms']:.2f}"
    )
    noise = f" [noisy: {row['noise']}]" if row.get("noise") else ""
    return (
        f"w{row['world_size']} {row['workload']}/{row['size']} {row['impl']}: {answer(row)} "
        f"(fastest {row['best_cap_mb']:g} MiB: {row['best_step_ms']:.2f} ms{interval}{gain}; "
        f"{row['repeats']} repeat(s) per cap){noise}"
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
