"""`ddpbench compare BASE NEW`: did anything get significantly slower?

Configurations are matched by what they measure (strategy, options, workload, size, world
size, batch, dtype, device), pooling repeats; each pair is judged on its raw per-step
samples (the slowest rank per step): ratio of medians with a bootstrap 95 % interval,
Mann-Whitney U p-value, and a verdict that needs both a ratio beyond the threshold and
p < 0.002 (asv's rule), so that noise alone never fails a CI job.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis import stats
from harness.plan.config import BASELINE_IMPL, ConfigError
from harness.results import store

MATCH_KEYS = (
    "impl",
    "impl_options",
    "workload",
    "size",
    "world_size",
    "nnodes",
    "batch_size",
    "dtype",
    "optimizer",
    "device",
)
ENVIRONMENT_KEYS = ("gpu_name", "driver_version", "torch_version", "nccl_version", "cpu_model", "hostname")


def load_samples(results, run_id: str) -> tuple[dict, pd.DataFrame]:
    run = store.run_dir(results, run_id)
    if not (run / "run.json").is_file():
        known = ", ".join(p.name for p in store.list_runs(results)[:5]) or "none"
        raise ConfigError(f"unknown run id {run_id!r} in {str(results)!r} (newest runs: {known})")
    configs, steps = store.read_configs(run), store.read_steps(run)
    measured = steps[~steps["warmup"]]
    slowest = measured.groupby(["config_id", "step"], as_index=False)["step_ms"].max()
    ok = configs[configs["status"] == "ok"][["config_id", *MATCH_KEYS]]
    return store.read_json(run / "run.json"), slowest.merge(ok, on="config_id")


def ratio_ci(base: list[float], new: list[float]) -> tuple[float, float]:
    """Bootstrap 95 % interval of median(new) / median(base), resampling both runs."""
    from scipy import stats as sp

    if len(base) < 2 or len(new) < 2:
        ratio = float(np.median(new) / np.median(base))
        return ratio, ratio
    result = sp.bootstrap(
        (np.asarray(new), np.asarray(base)),
        lambda n, b, axis=-1: np.median(n, axis=axis) / np.median(b, axis=axis),
        n_resamples=2000, method="percentile", random_state=0, vectorized=True,
    )  # fmt: skip
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def environment_differences(base_meta: dict, new_meta: dict) -> list[str]:
    base_env, new_env = base_meta.get("environment", {}), new_meta.get("environment", {})
    notes = [
        f"{key} differs: {base_env.get(key)!r} vs {new_env.get(key)!r}"
        for key in ENVIRONMENT_KEYS
        if base_env.get(key) != new_env.get(key)
    ]
    worlds = [sorted({c["world_size"] for c in meta.get("configurations", [])}) for meta in (base_meta, new_meta)]
    if worlds[0] != worlds[1]:
        notes.append(f"world sizes differ: {worlds[0]} vs {worlds[1]}")
    return notes


def match_keys(*, across_strategies: bool) -> list[str]:
    """What makes two configurations the same measurement; across strategies, the strategy is not part of it."""
    return [k for k in MATCH_KEYS if not (across_strategies and k in ("impl", "impl_options"))]


def _without_baseline(samples: pd.DataFrame) -> pd.DataFrame:
    return samples[samples["impl"] != BASELINE_IMPL]


def _check_unambiguous(samples: pd.DataFrame, keys: list[str], run_id: str) -> None:
    strategies = samples.groupby(keys, dropna=False)["impl"].nunique()
    if (strategies > 1).any():
        raise ConfigError(
            f"run {run_id!r} has several strategies per setup; --across-strategies compares runs of one strategy each"
        )


def _strategy_label(base: pd.DataFrame, new: pd.DataFrame) -> str:
    """'stock', or 'naive -> bucketed' when the two runs measured different strategies."""
    before, after = base["impl"].iloc[0], new["impl"].iloc[0]
    return before if before == after else f"{before} -> {after}"


def compare(
    results, base_id: str, new_id: str, *, threshold: float, across_strategies: bool = False
) -> tuple[pd.DataFrame, list[str]]:
    """(one row per matched configuration, environment warnings).

    `across_strategies` matches configurations whatever their strategy (the `local` baseline
    set aside), so a run of one strategy can be judged against a run of another.
    """
    base_meta, base = load_samples(results, base_id)
    new_meta, new = load_samples(results, new_id)
    keys = match_keys(across_strategies=across_strategies)
    if across_strategies:
        base, new = _without_baseline(base), _without_baseline(new)
        _check_unambiguous(base, keys, base_id)
        _check_unambiguous(new, keys, new_id)
    new_groups = dict(list(new.groupby(keys, dropna=False)))
    rows = []
    for key, base_group in base.groupby(keys, dropna=False):  # null keys (older rows) match too
        if key not in new_groups:
            continue
        new_group = new_groups[key]
        a, b = base_group["step_ms"].tolist(), new_group["step_ms"].tolist()
        judged = stats.verdict(a, b, threshold=threshold)
        low, high = ratio_ci(a, b)
        rows.append({
            **dict(zip(keys, key, strict=True)),
            "impl": _strategy_label(base_group, new_group),
            "impl_options": base_group["impl_options"].iloc[0],
            "base_ms": float(np.median(a)), "new_ms": float(np.median(b)),
            "ratio": judged["ratio"], "ratio_ci_low": low, "ratio_ci_high": high,
            "p_value": judged["p_value"], "verdict": judged["verdict"],
        })  # fmt: skip
    return pd.DataFrame(rows), environment_differences(base_meta, new_meta)


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' → 0.05."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 10:
        raise ConfigError(f"--threshold {text!r} is not valid; give a percentage such as 5% (or a fraction, 0.05)")
    return value
