"""Statistics as small pure functions over measured samples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def summarize(samples_ms: Sequence[float]) -> dict[str, float | None]:
    """Median, p10, p90 and coefficient of variation of step times."""
    values = np.asarray(samples_ms, dtype=float)
    if values.size == 0:
        return {"step_ms_median": None, "step_ms_p10": None, "step_ms_p90": None, "step_ms_cv": None}
    mean = values.mean()
    return {
        "step_ms_median": float(np.median(values)),
        "step_ms_p10": float(np.percentile(values, 10)),
        "step_ms_p90": float(np.percentile(values, 90)),
        "step_ms_cv": float(values.std(ddof=1) / mean) if values.size > 1 and mean > 0 else None,
    }


def slowest_rank_per_step(steps: pd.DataFrame) -> pd.Series:
    """Step time as the job sees it: per measured step, the slowest rank's time."""
    measured = steps[~steps["warmup"]] if "warmup" in steps else steps
    return measured.groupby("step")["step_ms"].max().sort_index()


def training_seconds(steps: pd.DataFrame) -> float:
    """Wall time the job spent in training steps, warm-up included: per step, the slowest rank."""
    if steps.empty:
        return 0.0
    return float(steps.groupby(["config_id", "step"])["step_ms"].max().sum() / 1000.0)


def samples_per_second(*, step_ms: float | None, batch_size: int, world_size: int) -> float | None:
    if not step_ms:
        return None
    return batch_size * world_size * 1000.0 / step_ms


def scaling_efficiency(
    samples_per_s: float | None, *, world_size: int, single_rank_samples_per_s: float | None
) -> float | None:
    """Weak scaling: throughput at n ranks over n times the throughput at one rank."""
    if not samples_per_s or not single_rank_samples_per_s:
        return None
    return samples_per_s / (world_size * single_rank_samples_per_s)


def exposed_comm_ms(step_ms: float | None, local_step_ms: float | None) -> float | None:
    """The communication that backward did not hide: step time above the no-comm floor."""
    if step_ms is None or local_step_ms is None:
        return None
    return step_ms - local_step_ms


def overlap_efficiency(step_ms: float | None, local_step_ms: float | None) -> float | None:
    """local / impl step time: 1.0 when communication is completely hidden."""
    if not step_ms or local_step_ms is None:
        return None
    return local_step_ms / step_ms


# ---- significance (used by sweeps and `ddpbench compare`) ----------------------------------------

SIGNIFICANCE_P = 0.002
"""Mann-Whitney U threshold for 'significantly different', as asv uses: few false alarms."""
NOISY_CV = 0.10
"""Coefficient of variation above which a configuration's timing is flagged as noisy."""


def bootstrap_median_ci(samples: Sequence[float], *, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median (scipy.stats.bootstrap)."""
    from scipy import stats as sp

    values = np.asarray(samples, dtype=float)
    if values.size < 2 or np.all(values == values[0]):
        return float(np.median(values)), float(np.median(values))
    result = sp.bootstrap(
        (values,), np.median, confidence_level=confidence, n_resamples=2000, method="percentile", random_state=seed
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value: do the two samples come from one distribution?"""
    from scipy import stats as sp

    if len(a) < 2 or len(b) < 2:
        return 1.0
    return float(sp.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def is_noisy(cv: float | None, *, threshold: float = NOISY_CV) -> bool:
    return cv is not None and cv > threshold


def verdict(base: Sequence[float], new: Sequence[float], *, threshold: float, p_limit: float = SIGNIFICANCE_P) -> dict:
    """Compare two step-time samples: the ratio of medians, its p-value, and what it means.

    'slower'/'faster' only when the difference is both beyond `threshold` (a fraction, e.g.
    0.05) and significant; a large but insignificant difference is 'no significant change'.
    """
    ratio = float(np.median(new) / np.median(base))
    p = mann_whitney_p(base, new)
    significant = p < p_limit
    if significant and ratio > 1 + threshold:
        word = "slower"
    elif significant and ratio < 1 - threshold:
        word = "faster"
    else:
        word = "no significant change"
    return {"ratio": ratio, "p_value": p, "verdict": word}


DDP_DEFAULT_CAP_MB = 25.0


def recommend_cap(
    samples_by_cap: dict[float, Sequence[float]],
    *,
    default_cap: float = DDP_DEFAULT_CAP_MB,
    p_limit: float = SIGNIFICANCE_P,
) -> dict:
    """The fastest bucket cap, its median's 95 % CI, the caps not significantly slower than it
    (how flat the optimum is), and its gain over DDP's default cap when that was measured."""
    medians = {cap: float(np.median(samples)) for cap, samples in samples_by_cap.items()}
    best = min(medians, key=medians.get)
    low, high = bootstrap_median_ci(samples_by_cap[best])
    equivalent = sorted(
        cap for cap, samples in samples_by_cap.items() if mann_whitney_p(samples_by_cap[best], samples) >= p_limit
    )
    gain = medians[default_cap] / medians[best] - 1 if default_cap in medians else None
    return {
        "best_cap_mb": best,
        "best_step_ms": medians[best],
        "best_ci_low_ms": low,
        "best_ci_high_ms": high,
        "equivalent_caps_mb": sorted({best, *equivalent}),
        "gain_vs_default": gain,
    }


def prediction_error(caps: Sequence[float], measured: Sequence[float], predicted: Sequence[float]) -> dict:
    """How well a predicted curve over bucket caps matches the measured one.

    MAPE (mean absolute percentage error), the best cap of each, and how many grid steps
    apart they are (0: the prediction picks the measured best; the target is at most 1).
    """
    order = np.argsort(np.asarray(caps, dtype=float))
    caps_sorted = np.asarray(caps, dtype=float)[order]
    measured_sorted = np.asarray(measured, dtype=float)[order]
    predicted_sorted = np.asarray(predicted, dtype=float)[order]
    best_measured, best_predicted = int(np.argmin(measured_sorted)), int(np.argmin(predicted_sorted))
    return {
        "mape": float(np.mean(np.abs(predicted_sorted - measured_sorted) / measured_sorted)),
        "best_measured_cap_mb": float(caps_sorted[best_measured]),
        "best_predicted_cap_mb": float(caps_sorted[best_predicted]),
        "best_cap_grid_steps": abs(best_measured - best_predicted),
    }
