"""Throughput and weak scaling: samples a second, scaling efficiency per repeat and pooled over repeats (against one
rank and against local), speedup over local."""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles
from harness.analysis.stats import geometric_mean


def samples_per_second(*, step_ms: float | None, batch_size: int, world_size: int) -> float | None:
    return batch_size * world_size * 1000.0 / step_ms if step_ms else None


def scaling_efficiency(
    samples_per_s: float | None, *, world_size: int, single_rank_samples_per_s: float | None
) -> float | None:
    """Weak scaling: throughput at n ranks over n times the throughput at one rank."""
    known = samples_per_s and single_rank_samples_per_s
    return samples_per_s / (world_size * single_rank_samples_per_s) if known else None


POOLED_SCALING_FIGURES = ("repeats", "baseline_repeats", "scaling_efficiency", "scaling_efficiency_vs_local")
SCALING_KEYS = ("impl", "impl_options", "workload", "size", "batch_size", "grad_accum",
                "dtype", "optimizer", "device", "backend")  # fmt: skip
"""What a world-size-1 baseline must share with the row it scales (as harness.handoff.records pairs them)."""


def pooled_scaling(configs: pd.DataFrame) -> pd.DataFrame:
    """Weak scaling summarised over repeats: per strategy, setup and world size, the centre (geometric
    mean) of its repeats' `samples_per_s` over n × the centre of the world-size-1 repeats'.

    The per-row `scaling_efficiency` pairs each repeat with the world-size-1 launch of the same
    repeat, so one slow world-size-1 launch moves every figure of its repeat (37 % in one repeat,
    75 % in the next); pooled, each repeat weighs 1/R in the baseline. Columns: the keys,
    `world_size`, `nnodes`, `repeats`, `baseline_repeats`, `scaling_efficiency` (null without a
    world-size-1 row), `scaling_efficiency_vs_local` (over n × the centre of the baseline strategy's
    world-size-1 repeats of the same setup: one process that communicates nothing, so the strategy's own
    cost at one rank counts too; null without such a row)."""
    keys = list(SCALING_KEYS)
    ok = configs[(configs["status"] == "ok") & configs["samples_per_s"].notna()] if not configs.empty else configs
    if ok.empty:
        return pd.DataFrame(columns=[*keys, "world_size", "nnodes", *POOLED_SCALING_FIGURES])
    centre = {"throughput": ("samples_per_s", geometric_mean), "repeats": ("samples_per_s", "size")}
    pooled = ok.groupby([*keys, "world_size", "nnodes"], dropna=False, as_index=False).agg(**centre)
    single = ok[ok["world_size"] == 1].groupby(keys, dropna=False, as_index=False).agg(**centre)
    single = single.rename(columns={"throughput": "baseline", "repeats": "baseline_repeats"})
    pooled = pooled.merge(single, on=keys, how="left")  # null keys (older rows) match null keys
    pooled["scaling_efficiency"] = pooled["throughput"] / (pooled["world_size"] * pooled["baseline"])
    pooled["baseline_repeats"] = pooled["baseline_repeats"].fillna(0).astype(int)
    setup = [key for key in keys if key not in ("impl", "impl_options")]
    plain = ok[roles.is_baseline(ok).to_numpy() & (ok["world_size"] == 1).to_numpy()]
    plain = plain.groupby(setup, dropna=False, as_index=False).agg(plain=("samples_per_s", geometric_mean))
    pooled = pooled.merge(plain, on=setup, how="left")
    pooled["scaling_efficiency_vs_local"] = pooled["throughput"] / (pooled["world_size"] * pooled["plain"])
    return pooled.drop(columns=["throughput", "baseline", "plain"])


SCALING_ROW_KEYS = (*SCALING_KEYS, "world_size", "nnodes")
"""What identifies one of pooled_scaling's rows: the strategy, its setup and its world size."""


def pooled_scaling_per_row(configs: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Per row of `rows` (same index), pooled_scaling's two figures for its strategy, setup and world size:
    None without samples_per_s or a one-rank row. A key column the run does not have is a null key, as in
    pooled_scaling; nulls match nulls and numbers match by value (8 == 8.0)."""
    figures = ["scaling_efficiency", "scaling_efficiency_vs_local"]
    if "samples_per_s" not in configs or rows.empty:
        return pd.DataFrame(None, index=rows.index, columns=figures, dtype=object)
    pooled = pooled_scaling(configs.assign(**{key: None for key in SCALING_ROW_KEYS if key not in configs}))
    pairs = zip(pooled[list(SCALING_ROW_KEYS)].itertuples(index=False), pooled[figures].to_numpy(), strict=True)
    by_key = {_row_key(keys): [None if pd.isna(v) else float(v) for v in values] for keys, values in pairs}
    keyed = rows.assign(**{key: None for key in SCALING_ROW_KEYS if key not in rows})
    found = [by_key.get(_row_key(keys), [None, None]) for keys in keyed[list(SCALING_ROW_KEYS)].itertuples(index=False)]
    return pd.DataFrame(found, index=rows.index, columns=figures, dtype=object)


def _row_key(values) -> tuple:
    return tuple(None if pd.isna(v) else v for v in values)


def speedup_vs_local(step_ms: float | None, local_step_ms: float | None) -> float | None:
    """`local` step time / this step time at the same world size: what data parallelism costs here
    (not an overlap: communication is measured from the bucket timeline, harness.analysis.overlap)."""
    return local_step_ms / step_ms if step_ms and local_step_ms else None
