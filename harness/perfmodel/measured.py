"""What a run measured, as the step-time model reads it: a setup's rows, each role's step pooled over its repeats
as the run page pools them, and what each strategy costs beyond the baseline at one rank, where nothing is
communicated, told from noise (DDP's reducer, FSDP's hooks and bookkeeping)."""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles, stats

SETUP_KEYS = ["workload", "size", "batch_size", "dtype", "optimizer"]
# Rows written before a column existed hold null there; these were the only values then.
SETUP_DEFAULTS = {"dtype": "fp32", "optimizer": "sgd"}


def ddp_defaults_but_cap(rows: pd.DataFrame) -> pd.Series:
    """The model simulates DDP's reducer with its defaults (given or not); a comm hook or other knob is not
    modelled."""
    asked = [set(roles.beyond_defaults(impl, text)) - {"bucket_cap_mb"} for impl, text in
             zip(rows["impl"], rows["impl_options"], strict=True)]  # fmt: skip
    return pd.Series([not a for a in asked], index=rows.index, dtype=bool)


def of_setup(frame: pd.DataFrame, setup: dict) -> pd.DataFrame:
    """`frame`'s rows (configurations, profiles, model state) of this setup, as stored; a key the frame lacks (a
    run from before it was recorded) or holds null in counts as SETUP_DEFAULTS has it."""
    keys = [key for key in SETUP_KEYS if key in frame]
    return frame[(frame[keys].fillna(SETUP_DEFAULTS) == [setup[key] for key in keys]).all(axis=1)]


def setup_rows(configs: pd.DataFrame, setup: dict) -> pd.DataFrame:
    """The run's ok rows with a step (a failed row has none to pool) of this setup; rows written before dtype
    and optimizer were recorded take their defaults."""
    rows = configs.fillna(SETUP_DEFAULTS)
    rows = rows[(rows["status"] == "ok") & rows["step_ms_median"].notna()]
    for key, value in setup.items():
        rows = rows[rows[key] == value]
    return rows


def pooled_step_s(configs: pd.DataFrame, setup: dict, *, world: int, role: str) -> float | None:
    """The step (s) of the strategy with `role` (baseline, reference) at `world`, its repeats pooled as the run
    page pools them (stats.geometric_mean of their medians), so that what predict calls measured is its figure;
    the reference's with no option but the cap (the DDP the model simulates: a compression hook or another
    knob is a different step); None where the run has no such row."""
    medians = role_medians_ms(configs, setup, world=world, role=role)
    return stats.geometric_mean(medians) / 1e3 if len(medians) else None


def role_medians_ms(configs: pd.DataFrame, setup: dict, *, world: int, role: str) -> pd.Series:
    """The repeats' median steps (ms) `pooled_step_s` pools."""
    rows = setup_rows(configs, setup)
    rows = rows[roles.flag(rows, role) & (rows["world_size"] == world)]
    if role == "reference" and not rows.empty:
        rows = rows[ddp_defaults_but_cap(rows)]
    return rows["step_ms_median"]


def plain_medians_at_one_rank_ms(configs: pd.DataFrame, setup: dict, which, *, but=frozenset()) -> pd.Series:
    """The repeats' median steps (ms) at one rank of the strategy whose rows `which` (a roles predicate) selects,
    with no option set (`but` these)."""
    rows = setup_rows(configs, setup)
    asked = [roles.beyond_defaults(i, t) for i, t in zip(rows["impl"], rows["impl_options"], strict=True)]
    plain = pd.Series([set(a) <= set(but) for a in asked], index=rows.index, dtype=bool)
    return rows.loc[which(rows) & (rows["world_size"] == 1) & plain, "step_ms_median"]


def plain_step_at_one_rank_s(configs: pd.DataFrame, setup: dict, which) -> float | None:
    """The step (s) at one rank of the strategy whose rows `which` selects, with no option set, its repeats pooled
    as `pooled_step_s` pools them (`plain_medians_at_one_rank_ms`); None where the run has no such row."""
    medians = plain_medians_at_one_rank_ms(configs, setup, which)
    return stats.geometric_mean(medians) / 1e3 if len(medians) else None


def below_baseline(configs: pd.DataFrame, setup: dict, which, *, but=frozenset()) -> tuple[float, float] | None:
    """(its step, the baseline's) at one rank, pooled ms, where `which`'s strategy (no option but `but`) beats the
    baseline beyond noise (`above_beyond_noise`). None else."""
    if configs.empty:
        return None
    mine = plain_medians_at_one_rank_ms(configs, setup, which, but=but)
    local = role_medians_ms(configs, setup, world=1, role="baseline")
    told = above_beyond_noise(configs, setup, mine, local)
    return (stats.geometric_mean(mine), stats.geometric_mean(local)) if told else None


def above_beyond_noise(configs: pd.DataFrame, setup: dict, low_ms: pd.Series, high_ms: pd.Series) -> bool:
    """Whether the steps `high_ms` (repeats' medians of the setup's rows) lie above `low_ms`'s beyond noise: the
    interval of their ratio (Welch's t on the logs) above 1; with one repeat a side, which gives no interval, every
    timed step apart: `high_ms`'s p10 above `low_ms`'s p90 (a run from before they were recorded: not told)."""
    low = stats.ratio_interval(list(low_ms), list(high_ms))["low"] if len(low_ms) and len(high_ms) else 0.0
    if low == low:
        return bool(low > 1)
    rows = setup_rows(configs, setup)
    spread = "step_ms_p10" in rows and "step_ms_p90" in rows
    return spread and bool(rows.loc[high_ms.index, "step_ms_p10"].min() > rows.loc[low_ms.index, "step_ms_p90"].max())


def one_rank_baseline_s(configs: pd.DataFrame, setup: dict) -> float | None:
    """The baseline's step at one rank (s, its repeats pooled), None where the run has none."""
    return pooled_step_s(configs, setup, world=1, role="baseline")


def baseline_slowdown(configs: pd.DataFrame, setup: dict) -> tuple[int, float] | None:
    """(the largest world size the baseline ran at, its step there over its step at one rank): how much the run's
    ranks slowed each other's compute where nothing is communicated (a CPU's ranks sharing its cores, or a machine
    busy with something else); None where the run lacks either."""
    rows = setup_rows(configs, setup)
    worlds = sorted(rows.loc[roles.flag(rows, "baseline") & (rows["status"] == "ok"), "world_size"].unique())
    one, widest = one_rank_baseline_s(configs, setup), int(worlds[-1]) if worlds else 1
    there = pooled_step_s(configs, setup, world=widest, role="baseline") if widest > 1 else None
    return (widest, there / one) if one and there else None


def ddp_own_cost_s(configs: pd.DataFrame, setup: dict) -> float | None:
    """DDP's own cost at one rank, where nothing is communicated: the reference's step minus the baseline's (≥ 0);
    None where the run lacks either. Every cap is pooled: the cost is mostly copying gradients into buckets and
    back, the same bytes whatever the cap, and the difference of two noisy figures per cap would be mostly noise."""
    difference = reference_minus_baseline_s(configs, setup)
    return max(0.0, difference) if difference is not None else None


def ddp_own_cost_told(configs: pd.DataFrame, setup: dict) -> bool:
    """DDP's step at one rank above the baseline's beyond noise (`above_beyond_noise`): 804-1470 ms against 804-825
    read as 340 ms of DDP's own hid FSDP's 184 beyond it; one repeat a side, not told, took DDP's 433 ms as 0."""
    local = role_medians_ms(configs, setup, world=1, role="baseline")
    return above_beyond_noise(configs, setup, local, role_medians_ms(configs, setup, world=1, role="reference"))


def reference_minus_baseline_s(configs: pd.DataFrame, setup: dict) -> float | None:
    """The reference's step at one rank minus the baseline's, as measured: below 0 where noise made
    DDP look free (`ddp_own_cost_s` takes that as 0, and the console says so)."""
    local_1 = one_rank_baseline_s(configs, setup)
    stock_1 = pooled_step_s(configs, setup, world=1, role="reference")
    return stock_1 - local_1 if stock_1 and local_1 else None


def fsdp_own_cost_s(configs: pd.DataFrame, setup: dict) -> float | None:
    """FSDP's own cost at one rank: its step there (no option set, repeats pooled) minus the baseline's (≥ 0);
    None where the run lacks either, or FSDP's is faster beyond noise (`below_baseline`: no cost). Told from noise or
    not (`fsdp_own_cost_told`): a cluster's prediction takes one not told as a range from 0
    (own_costs.fsdp_for_cluster)."""
    fsdp_s, baseline_s = plain_step_at_one_rank_s(configs, setup, roles.shards_parameters), None
    if fsdp_s and not below_baseline(configs, setup, roles.shards_parameters):
        baseline_s = one_rank_baseline_s(configs, setup)
    return max(0.0, fsdp_s - baseline_s) if fsdp_s and baseline_s else None


def fsdp_own_cost_told(configs: pd.DataFrame, setup: dict) -> bool:
    """FSDP's step at one rank above the baseline's beyond noise (`above_beyond_noise`), as DDP's must be
    (`ddp_own_cost_told`): 39.6 ms against 14.1 with every step apart is told; 31 against 30 with their spreads
    overlapping is not, and its 1 ms is no measured figure."""
    mine = plain_medians_at_one_rank_ms(configs, setup, roles.shards_parameters)
    local = role_medians_ms(configs, setup, world=1, role="baseline")
    return above_beyond_noise(configs, setup, local, mine)


def zero_own_cost_s(configs: pd.DataFrame, setup: dict) -> float | None:
    """ZeRO's own cost at one rank, where nothing is communicated: its step there (no option but the cap, repeats
    pooled, every cap alike as DDP's are) minus the reference's (DDP's, its own cost in it), where ZeRO's lies above
    DDP's beyond noise, as DDP's above the baseline's must for FSDP's own cost to be taken beyond it
    (`above_beyond_noise`: the interval of their ratio, or with one repeat a side every step apart). None where it
    does not, or the run lacks either. A difference of two noisy one-rank figures is mostly noise on a shared
    machine: 33 ms of gpt2/small's 246 ms in one launch here, 0 in the next (docs/measured)."""
    found = zero_own_cost_found(configs, setup)
    return found[0] if found and found[1] else None


def zero_own_cost_found(configs: pd.DataFrame, setup: dict) -> tuple[float, bool] | None:
    """(ZeRO's step at one rank minus DDP's, s, as `zero_own_cost_s` pools them; whether told from noise); None
    where the run lacks either: a difference not told is no figure, but bounds a step from 0
    (`own_costs.zero_for_cluster`)."""
    zero_ms = plain_medians_at_one_rank_ms(
        configs, setup, roles.sharded_optimizer_over_allreduce, but={"bucket_cap_mb"}
    )  # a cap sweep's rows: DDP's pooled alike
    ddp_ms = role_medians_ms(configs, setup, world=1, role="reference")
    if not len(zero_ms) or not len(ddp_ms):
        return None
    told = above_beyond_noise(configs, setup, ddp_ms, zero_ms)
    return (stats.geometric_mean(zero_ms) - stats.geometric_mean(ddp_ms)) / 1e3, told
