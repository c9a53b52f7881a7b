"""Statistics as small pure functions over measured samples."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.drift import drift_note, step_drift
from harness.bucketing import DDP_DEFAULT_CAP_MB
from harness.results.values import counted, ms_text


def summarize(samples_ms: Sequence[float]) -> dict[str, float | None]:
    """Median, p10, p90 and coefficient of variation of step times, and their drift (step_drift: the
    samples in step order)."""
    values = np.asarray(samples_ms, dtype=float)
    drift = step_drift(values)
    drift_columns = {"step_ms_drift": drift["drift"], "step_ms_drift_se": drift["drift_se"]}
    if values.size == 0:
        return {**dict.fromkeys(("step_ms_median", "step_ms_p10", "step_ms_p90", "step_ms_cv")), **drift_columns}
    mean = values.mean()
    cv = float(values.std(ddof=1) / mean) if values.size > 1 and mean > 0 else None
    return {"step_ms_median": float(np.median(values)), "step_ms_p10": float(np.percentile(values, 10)),
            "step_ms_p90": float(np.percentile(values, 90)), "step_ms_cv": cv, **drift_columns}  # fmt: skip


def slowest_rank_per_step(steps: pd.DataFrame) -> pd.Series:
    """Step time as the job sees it: per measured step, the slowest rank's time."""
    measured = steps[~steps["warmup"]] if "warmup" in steps else steps
    return measured.groupby("step")["step_ms"].max().sort_index()


def training_seconds(steps: pd.DataFrame) -> float:
    """Wall time the job spent in training steps, warm-up included: per step, the slowest rank."""
    if steps.empty:
        return 0.0
    return float(steps.groupby(["config_id", "step"])["step_ms"].max().sum() / 1000.0)


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
"""Assumed spread of a repeat's median between launches on a quiet machine: only for a one-repeat run's need."""
REFERENCE_CAP_MB = DDP_DEFAULT_CAP_MB
"""The cap a sweep's gain is measured against: 25 MiB, the value DDP uses when none is given, but given
explicitly like every cap of a sweep (on torch ≥ 2.9 that caps the first bucket too: not DDP's default layout)."""
DEFAULT_THRESHOLD = 0.05
"""The smallest change that counts, for `compare` and for a recommended cap's gain (both judged by `verdict`)."""
RECOMMENDED_REPEATS = 5
"""Repeats for runs meant to be compared: they decide at DEFAULT_THRESHOLD when launches agree within ~2.5 % (sd)."""
NEEDED_WIDTH = 0.75
"""How many repeats a decision needs is sized for an interval this fraction of the threshold wide."""
MAX_REPEATS = 1000
NOISY_CV = 0.10
"""Coefficient of variation above which a configuration's steps (or its repeats) are flagged as noisy."""

SLOWER, FASTER, NO_CHANGE, TOO_FEW = "slower", "faster", "no significant change", "too few repeats to tell"
RECOMMEND, FLAT = "recommend", "flat"


def is_noisy(cv: float | None, *, threshold: float = NOISY_CV) -> bool:
    return cv is not None and cv > threshold


def cv_text(cv: float) -> str:
    """A step CV for reading: two decimals, more where fewer would read as the threshold itself (0.0996 'steady'
    and 0.1012 'noisy' both once read 0.10): 0.0996, 0.101."""
    for decimals in range(2, 7):
        text = f"{cv:.{decimals}f}"
        if float(text) != NOISY_CV or cv == NOISY_CV:
            return text
    return text


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
    """One repeat's evidence: its median step, the CV of its steps, the batch-means standard
    error of its mean log step (a relative uncertainty that respects autocorrelation) and how far its
    steps drift within the window (step_drift: `drift`, `drift_se`), from its steps in step order."""
    values = np.asarray(steps_ms, dtype=float)
    cv = float(values.std(ddof=1) / values.mean()) if values.size > 1 and values.mean() > 0 else None
    return {"median_ms": float(np.median(values)), "cv": cv, "rel_se": batch_means_se(np.log(values)),
            **step_drift(values)}  # fmt: skip


def geometric_mean(figures: Sequence[float]) -> float:
    """How the repeats of one configuration are pooled, everywhere a figure stands for them (ranks, ratios,
    verdicts, the recommended cap, predict's 'measured'): the geometric mean of the known values, NaN with none."""
    known = np.asarray(figures, dtype=float)
    return float(np.exp(np.log(known[~np.isnan(known)]).mean())) if (~np.isnan(known)).any() else float("nan")


def sample_var(values: np.ndarray) -> float:
    """np.var(values, ddof=1) in the same arithmetic, without its per-call overhead (a sweep's verdicts take
    thousands of variances of a few repeats each)."""
    deviations = values - values.sum() / values.size
    return float((deviations * deviations).sum() / (values.size - 1))


def center_interval(figures_ms: Sequence[float], *, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(geometric mean of the repeats' medians, its t interval); the interval is NaN with one repeat."""
    logs = np.log(np.asarray(figures_ms, dtype=float))
    mean = logs.sum() / logs.size  # np.mean's arithmetic, without its overhead (as sample_var)
    if logs.size < MIN_REPEATS:
        return float(np.exp(mean)), float("nan"), float("nan")
    half = t_quantile(0.5 + confidence / 2, logs.size - 1) * np.sqrt(sample_var(logs)) / np.sqrt(logs.size)
    return float(np.exp(mean)), float(np.exp(mean - half)), float(np.exp(mean + half))


@functools.lru_cache(maxsize=4096)  # repeats_needed asks for the same few (confidence, df) thousands of times
def t_quantile(probability: float, df: float) -> float:
    """Student's t quantile (scipy.special.stdtrit: scipy.stats.t.ppf without its per-call overhead)."""
    from scipy import special

    return float(special.stdtrit(df, probability))


def welch(a: np.ndarray, b: np.ndarray, *, confidence: float) -> tuple[float, float, float]:
    """Welch's t test of mean(b) − mean(a): (p value, interval low, interval high), the figures
    scipy.stats.ttest_ind(b, a, equal_var=False) gives, from their formulas."""
    from scipy import special

    va, vb = sample_var(a) / a.size, sample_var(b) / b.size
    difference, se = b.sum() / b.size - a.sum() / a.size, np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    p_value = 2 * special.stdtr(df, -abs(difference) / se)
    half = t_quantile(0.5 + confidence / 2, df) * se
    return float(p_value), float(difference - half), float(difference + half)


def ratio_interval(
    base_ms: Sequence[float], new_ms: Sequence[float], *, confidence: float = CONFIDENCE, paired: bool = False
) -> dict:
    """new / base as a ratio of geometric means of repeat medians, with its t test and interval on the
    logs: Welch's over two independent sets, or, `paired` (the i-th of each ran in the same launch), the
    one-sample t of the per-launch log ratios, which a launch's common slowness leaves out. Needs two
    repeats a side; identical repeats give a zero-width interval."""
    a, b = np.log(np.asarray(base_ms, dtype=float)), np.log(np.asarray(new_ms, dtype=float))
    ratio = float(np.exp(b.sum() / b.size - a.sum() / a.size))
    if min(a.size, b.size) < MIN_REPEATS:
        return {"ratio": ratio, "low": float("nan"), "high": float("nan"), "p_value": float("nan")}
    differences = b - a if paired else None
    if (a.min() == a.max() and b.min() == b.max()) or (paired and differences.min() == differences.max()):  # exact
        return {"ratio": ratio, "low": ratio, "high": ratio, "p_value": float(ratio == 1.0)}
    if paired:
        p_value, low, high = one_sample(differences, confidence=confidence)
    else:
        p_value, low, high = welch(a, b, confidence=confidence)
    return {"ratio": ratio, "low": float(np.exp(low)), "high": float(np.exp(high)), "p_value": p_value}


def one_sample(differences: np.ndarray, *, confidence: float) -> tuple[float, float, float]:
    """The t test of mean(differences) against 0: (p value, interval low, interval high), the figures
    scipy.stats.ttest_1samp gives, from their formulas."""
    from scipy import special

    df = differences.size - 1
    difference, se = differences.mean(), np.sqrt(sample_var(differences)) / np.sqrt(differences.size)
    p_value = 2 * special.stdtr(df, -abs(difference) / se)
    half = t_quantile(0.5 + confidence / 2, df) * se
    return float(p_value), float(difference - half), float(difference + half)


PAIRED_FROM = 8
"""Repeats from which a sweep's caps that ran side by side are judged launch by launch (`recommend_cap`).
Here they correlate 0.80–0.96 launch by launch, but a pair of n launches has n − 1 degrees of freedom, not
about 2n − 2: pairing pays above a correlation of 0.66 at 4 repeats, 0.32 from 8. Fixed by the count, never
by the correlation a run shows, so each look keeps its error rate (docs/statistics.md)."""


def same_launches(*repeat_lists: Sequence[int]) -> bool:
    """Whether configurations with these repeats ran side by side, launch by launch: each once in each of
    the same repeats (a repeat is one launch per world size)."""
    first = sorted(repeat_lists[0])
    return len(set(first)) == len(first) and all(sorted(other) == first for other in repeat_lists)


ROUGH_UNDER = 5
"""Under this many repeats the spread, and what it predicts (the repeats a verdict needs, the time they take), are
said to be a rough guide: 3 repeats once said 'need about 5', and the 6th found 341."""


def rough_guide(repeats: int | None) -> str:
    """', a rough guide from 3 repeats' under ROUGH_UNDER repeats, else '': the one mark of every figure sized from
    so few repeats' spread; a clause, not a bracket, as the figures it marks are mostly said inside one."""
    few = repeats is not None and repeats < ROUGH_UNDER
    return f", a rough guide from {repeats_text(int(repeats))}" if few else ""  # '1 repeat', not '1 repeats'


def open_text(repeats: int, so_far: str, needed, *, why: str = "") -> str:
    """An open verdict: 'open after 2 repeats; so far 0.81× stock's step (1.24× faster; …); need about 4, a rough
    guide from 2 repeats', the console's and the run page's. Said after a semicolon, not inside a bracket of its own:
    its estimate carries one (a bracket in a bracket read as a slip)."""
    so_far = f"; so far {so_far}" if so_far else ""
    return f"open after {repeats_text(repeats)}{so_far}; {needed_text(needed, repeats)}{why}"


def needed_text(needed, repeats: int | None = None) -> str:
    """'need about M' for a count of repeats that can be run, marked a rough guide when sized from fewer than
    ROUGH_UNDER `repeats`; at the cap, say that no practical number
    will do (the repeats differ far beyond the threshold), not a number nobody will run, at the ratio so far: the
    need is sized from it (repeats_needed), and another run's ratio, within the same interval, may need far fewer."""
    if needed is None or needed != needed:
        return "need more"
    if int(needed) >= MAX_REPEATS:
        return f"need more than {MAX_REPEATS} at the ratio so far: the repeats differ far beyond the threshold"
    return f"need about {int(needed)}{rough_guide(repeats)}"


def repeats_needed(
    spread: float,
    *,
    threshold: float,
    confidence: float = CONFIDENCE,
    ratio: float | None = None,
    paired: bool = False,
) -> int | None:
    """Repeats per run for the interval of a ratio to be narrow enough to decide in most runs, when one
    repeat's median varies by `spread` (relative sd): narrower than ±threshold (what 'no significant
    change' needs), or, where the `ratio` seen lies beyond the threshold, narrow enough to keep the
    threshold out (what 'slower'/'faster' needs), whichever is wider. The expected half-width is aimed
    at NEEDED_WIDTH of that, a margin for the spread's own scatter; `paired` repeats have half the degrees of
    freedom (and their `spread` is paired_spread's). None for a zero threshold."""
    if threshold <= 0 or not np.isfinite(spread):
        return None
    bound = np.log1p(threshold)
    beyond = abs(np.log(ratio)) - bound if ratio is not None and ratio > 0 and np.isfinite(ratio) else 0.0
    target = NEEDED_WIDTH * max(bound, beyond)

    def narrow(repeats: int) -> bool:
        df = repeats - 1 if paired else 2 * repeats - 2
        return t_quantile(0.5 + confidence / 2, df) * spread * np.sqrt(2 / repeats) <= target

    low, high = MIN_REPEATS, MAX_REPEATS  # the first count narrow enough, by bisection: the width only falls
    while low < high:
        low, high = (low, (low + high) // 2) if narrow((low + high) // 2) else ((low + high) // 2 + 1, high)
    return low


def repeat_spread(*figure_sets: Sequence[float], rel_se: float | None = None) -> float:
    """The relative sd of one repeat's median: pooled over the sets that have two repeats or more;
    otherwise a quiet machine's launch spread combined with the steps' own uncertainty."""
    variances = [sample_var(np.log(np.asarray(f, dtype=float))) for f in figure_sets if len(f) >= MIN_REPEATS]
    if variances:
        return float(np.sqrt(np.mean(variances)))
    within = rel_se if rel_se is not None and np.isfinite(rel_se) else 0.0
    return float(np.hypot(LAUNCH_SPREAD, within))


def paired_spread(*pairs: tuple[Sequence[float], Sequence[float]]) -> float:
    """For paired repeats, the relative sd one repeat's median would need, without the launch's share, to
    give the spread seen in the per-launch log ratios: their sd / √2, pooled over the pairs of sets."""
    variances = [sample_var(np.log(np.asarray(b, dtype=float)) - np.log(np.asarray(a, dtype=float))) / 2
                 for a, b in pairs if len(a) >= MIN_REPEATS]  # fmt: skip
    return float(np.sqrt(np.mean(variances))) if variances else LAUNCH_SPREAD


def verdict(
    base_ms: Sequence[float],
    new_ms: Sequence[float],
    *,
    threshold: float,
    rel_se: float | None = None,
    confidence: float = CONFIDENCE,
    paired: bool = False,
) -> dict:
    """Judge two runs' repeat medians of one configuration.

    'slower'/'faster' when the interval of the ratio lies beyond 1 ± threshold, or is narrower than
    ±threshold, excludes 1 and has the ratio beyond the threshold. Before that, whether the evidence
    can decide at all: with fewer than two repeats a side, or an interval wider than ±threshold that
    settles nothing, the verdict is 'too few repeats to tell', with how many would do (never 'no
    significant change'). `confidence`: of the interval (95 % for one look; `--repeats auto` raises it to
    pay for its repeated looks). `paired`: the
    i-th repeat of each ran in the same launch (stats.same_launches), so the ratio is judged launch by launch.
    """
    have = min(len(base_ms), len(new_ms))
    judged = ratio_interval(base_ms, new_ms, confidence=confidence, paired=paired)
    spread = paired_spread((base_ms, new_ms)) if paired else repeat_spread(base_ms, new_ms, rel_se=rel_se)
    need = repeats_needed(spread, threshold=threshold, confidence=confidence, ratio=judged["ratio"], paired=paired)
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
        need = None if need is None else max(need, have + 1)  # what is at hand did not decide: one more at least
    return {**judged, "verdict": word, "repeats": have, "repeats_needed": need}


def repeats_noise_note(summaries: Sequence[dict]) -> str:
    """noise_note over the repeat_summary figures of a configuration's repeats (a dict per repeat)."""
    figures = {key: [r[key] for r in summaries] for key in ("cv", "median_ms", "drift", "drift_se")}
    return noise_note(figures["cv"], figures["median_ms"], drifts=figures["drift"], drift_ses=figures["drift_se"])


def noise_note(
    cvs: Sequence[float | None],
    medians_ms: Sequence[float],
    *,
    drifts: Sequence[float | None] = (),
    drift_ses: Sequence[float | None] = (),
) -> str:
    """'' when a configuration's evidence is clean; else why not: its steps are noisy (median CV
    over its repeats above NOISY_CV), its repeats disagree (their medians spread by more), or its steps
    drift within the window (drift_note over the repeats' `drifts` and their `drift_ses`)."""
    notes = []
    known = [cv for cv in cvs if cv is not None and np.isfinite(cv)]
    if known and is_noisy(float(np.median(known))):
        notes.append(f"noisy steps (CV {cv_text(float(np.median(known)))})")
    if len(medians_ms) >= MIN_REPEATS and max(medians_ms) / min(medians_ms) - 1 > NOISY_CV:
        notes.append(f"repeats disagree ({ms_text(min(medians_ms))}–{ms_text(max(medians_ms))} ms)")
    if drifted := drift_note(drifts, drift_ses):
        notes.append(drifted)
    return "; ".join(notes)


def repeats_text(count: int) -> str:
    """'1 repeat', '3 repeats': a count of one said in the singular."""
    return counted(count, "repeat")
