"""Statistics as small pure functions over measured samples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.bucketing import DDP_DEFAULT_CAP_MB


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


def speedup_vs_local(step_ms: float | None, local_step_ms: float | None) -> float | None:
    """`local` step time / this step time at the same world size: what data parallelism costs here
    (not an overlap: communication is measured from the bucket timeline, harness.analysis.overlap)."""
    if not step_ms or not local_step_ms:
        return None
    return local_step_ms / step_ms


# ---- evidence: the repeat (one launch of a configuration) is the unit -----------------------------
#
# Steps inside one launch are autocorrelated and launches differ from each other by a few per
# cent, so per-step samples are not independent evidence: a test over steps calls identical code
# "slower" in a third of pairs (docs/statistics.md). Each repeat is summarised by its median step;
# the tests and intervals below run over those repeat-level figures, on the log scale (a ratio).

CONFIDENCE = 0.95
"""Two-sided confidence of every interval; a difference is significant when its interval excludes none."""
MIN_REPEATS = 2
"""With one repeat a run says nothing about how launches differ: no verdict can rest on it."""
LAUNCH_SPREAD = 0.03
"""Assumed relative spread of a repeat's median from launch to launch on a quiet machine (a few per cent);
used only to say how many repeats a one-repeat run would need."""
DEFAULT_THRESHOLD = 0.05
"""The smallest change that counts, for `compare` and for a recommended cap's gain."""
RECOMMENDED_REPEATS = 5
"""Repeats for runs meant to be compared (and `make sweep`): they decide at DEFAULT_THRESHOLD when
launches agree within about 2.5 % (sd); noisier machines are told how many more they need."""
NEEDED_WIDTH = 0.75
"""How many repeats a decision needs is sized for an interval this fraction of the threshold wide."""
MAX_REPEATS = 1000
NOISY_CV = 0.10
"""Coefficient of variation above which a configuration's steps (or its repeats) are flagged as noisy."""

SLOWER, FASTER, NO_CHANGE, TOO_FEW = "slower", "faster", "no significant change", "too few repeats to tell"
RECOMMEND, FLAT = "recommend", "flat"


def is_noisy(cv: float | None, *, threshold: float = NOISY_CV) -> bool:
    return cv is not None and cv > threshold


def batch_means_se(values: Sequence[float]) -> float | None:
    """Standard error of the mean of an autocorrelated series: the spread of the means of √n
    contiguous batches (batch means), which, unlike s/√n, grows with the autocorrelation."""
    series = np.asarray(values, dtype=float)
    batches = int(np.sqrt(series.size))
    if batches < 2:
        return None
    size = series.size // batches
    means = series[: batches * size].reshape(batches, size).mean(axis=1)
    return float(means.std(ddof=1) / np.sqrt(batches))


def repeat_summary(steps_ms: Sequence[float]) -> dict[str, float | None]:
    """One repeat's evidence: its median step, the CV of its steps and the batch-means standard
    error of its mean log step (a relative uncertainty that respects autocorrelation)."""
    values = np.asarray(steps_ms, dtype=float)
    cv = float(values.std(ddof=1) / values.mean()) if values.size > 1 and values.mean() > 0 else None
    return {"median_ms": float(np.median(values)), "cv": cv, "rel_se": batch_means_se(np.log(values))}


def center_interval(figures_ms: Sequence[float], *, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(geometric mean of the repeats' medians, its t interval); the interval is NaN with one repeat."""
    logs = np.log(np.asarray(figures_ms, dtype=float))
    center = float(np.exp(logs.mean()))
    if logs.size < MIN_REPEATS:
        return center, float("nan"), float("nan")
    from scipy import stats as sp

    half = sp.t.ppf(0.5 + confidence / 2, logs.size - 1) * logs.std(ddof=1) / np.sqrt(logs.size)
    return center, float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))


def ratio_interval(base_ms: Sequence[float], new_ms: Sequence[float], *, confidence: float = CONFIDENCE) -> dict:
    """new / base as a ratio of geometric means of repeat medians, with Welch's t test and interval
    on the logs (scipy). Needs two repeats a side; identical repeats give a zero-width interval."""
    from scipy import stats as sp

    a, b = np.log(np.asarray(base_ms, dtype=float)), np.log(np.asarray(new_ms, dtype=float))
    ratio = float(np.exp(b.mean() - a.mean()))
    if min(a.size, b.size) < MIN_REPEATS:
        return {"ratio": ratio, "low": float("nan"), "high": float("nan"), "p_value": float("nan")}
    if a.var() == 0 and b.var() == 0:  # nothing varies: the difference is exact
        return {"ratio": ratio, "low": ratio, "high": ratio, "p_value": float(ratio == 1.0)}
    test = sp.ttest_ind(b, a, equal_var=False)
    interval = test.confidence_interval(confidence_level=confidence)
    low, high = float(np.exp(interval.low)), float(np.exp(interval.high))
    return {"ratio": ratio, "low": low, "high": high, "p_value": float(test.pvalue)}


def needed_text(needed) -> str:
    """'need about M' for a count of repeats that can be run; at the cap, say that no practical number
    will do (the repeats differ far beyond the threshold), not a number nobody will run."""
    if needed is None or needed != needed:
        return "need more"
    if int(needed) >= MAX_REPEATS:
        return f"need more than {MAX_REPEATS}: the repeats differ far beyond the threshold"
    return f"need about {int(needed)}"


def repeats_needed(spread: float, *, threshold: float, confidence: float = CONFIDENCE) -> int | None:
    """Repeats per run for the interval of a ratio to be narrower than ±threshold in most runs, when
    one repeat's median varies by `spread` (relative sd): the expected half-width is aimed at
    NEEDED_WIDTH of the threshold, a margin for the spread's own scatter. None for a zero threshold."""
    from scipy import stats as sp

    if threshold <= 0 or not np.isfinite(spread):
        return None
    target = NEEDED_WIDTH * np.log1p(threshold)
    for repeats in range(MIN_REPEATS, MAX_REPEATS + 1):
        if sp.t.ppf(0.5 + confidence / 2, 2 * repeats - 2) * spread * np.sqrt(2 / repeats) <= target:
            return repeats
    return MAX_REPEATS


def repeat_spread(*figure_sets: Sequence[float], rel_se: float | None = None) -> float:
    """The relative sd of one repeat's median: pooled over the sets that have two repeats or more;
    otherwise a quiet machine's launch spread combined with the steps' own uncertainty."""
    variances = [np.var(np.log(np.asarray(f, dtype=float)), ddof=1) for f in figure_sets if len(f) >= MIN_REPEATS]
    if variances:
        return float(np.sqrt(np.mean(variances)))
    within = rel_se if rel_se is not None and np.isfinite(rel_se) else 0.0
    return float(np.hypot(LAUNCH_SPREAD, within))


def verdict(
    base_ms: Sequence[float], new_ms: Sequence[float], *, threshold: float, rel_se: float | None = None
) -> dict:
    """Judge two runs' repeat medians of one configuration.

    'slower'/'faster' when the interval of the ratio excludes 1 and the ratio is beyond the
    threshold. Before that, whether the evidence can decide at all: with fewer than two repeats a
    side, or an interval wider than ±threshold that settles nothing, the verdict is 'too few
    repeats to tell', with how many would do (never 'no significant change').
    """
    have = min(len(base_ms), len(new_ms))
    judged = ratio_interval(base_ms, new_ms)
    need = repeats_needed(repeat_spread(base_ms, new_ms, rel_se=rel_se), threshold=threshold)
    low, high, bound = judged["low"], judged["high"], 1 + threshold
    narrow = np.log(high / low) / 2 <= np.log1p(threshold)  # False with one repeat (NaN)
    if have >= MIN_REPEATS and (low > bound or (narrow and low > 1 and judged["ratio"] > bound)):
        word = SLOWER
    elif have >= MIN_REPEATS and (high < 1 / bound or (narrow and high < 1 and judged["ratio"] < 1 / bound)):
        word = FASTER
    elif narrow:
        word = NO_CHANGE
    else:
        word = TOO_FEW
    return {**judged, "verdict": word, "repeats": have, "repeats_needed": need}


def noise_note(cvs: Sequence[float | None], medians_ms: Sequence[float]) -> str:
    """'' when a configuration's evidence is clean; else why not: its steps are noisy (median CV
    over its repeats above NOISY_CV) or its repeats disagree (their medians spread by more)."""
    notes = []
    known = [cv for cv in cvs if cv is not None and np.isfinite(cv)]
    if known and is_noisy(float(np.median(known))):
        notes.append(f"noisy steps (CV {np.median(known):.2f})")
    if len(medians_ms) >= MIN_REPEATS and max(medians_ms) / min(medians_ms) - 1 > NOISY_CV:
        notes.append(f"repeats disagree ({min(medians_ms):.3g}–{max(medians_ms):.3g} ms)")
    return "; ".join(notes)


def recommend_cap(
    figures_by_cap: dict[float, Sequence[float]],
    *,
    default_cap: float = DDP_DEFAULT_CAP_MB,
    threshold: float = DEFAULT_THRESHOLD,
) -> dict:
    """From each cap's repeat medians: the fastest cap, its interval, the caps not significantly
    slower (how flat the optimum is), and the decision: 'recommend' only when the fastest beats
    DDP's default significantly (or, without the default, every other cap); 'flat' when it does
    not; 'too few repeats to tell' when the repeats cannot decide that at the threshold."""
    centers = {cap: center_interval(figures) for cap, figures in figures_by_cap.items()}
    best = min(centers, key=lambda cap: centers[cap][0])
    have = min(len(figures) for figures in figures_by_cap.values())
    versus = {cap: ratio_interval(figures_by_cap[best], figures) for cap, figures in figures_by_cap.items()}
    equivalent = sorted(cap for cap in figures_by_cap if cap == best or not versus[cap]["low"] > 1)
    # Against DDP's default where it was measured, else against every other cap.
    rivals = [default_cap] if default_cap in figures_by_cap and default_cap != best else sorted(set(centers) - {best})
    unbeaten = [cap for cap in rivals if not versus[cap]["low"] > 1]
    widest = max((np.log(versus[cap]["high"] / versus[cap]["low"]) / 2 for cap in unbeaten), default=0.0)
    undecided = have < MIN_REPEATS or widest > np.log1p(threshold)
    decision = TOO_FEW if undecided else (FLAT if unbeaten else RECOMMEND)
    default = centers.get(default_cap)
    return {
        "decision": decision,
        "best_cap_mb": best,
        "best_step_ms": centers[best][0],
        "best_ci_low_ms": centers[best][1],
        "best_ci_high_ms": centers[best][2],
        "equivalent_caps_mb": equivalent if have >= MIN_REPEATS else sorted(figures_by_cap),
        "gain_vs_default": default[0] / centers[best][0] - 1 if default else None,
        "repeats": have,
        "repeats_needed": repeats_needed(repeat_spread(*figures_by_cap.values()), threshold=threshold),
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
