"""A sweep's points judged from their figures: the fastest point, its interval, the points it does not beat, the
decision (`recommend_cap`), and one point against another (`cap_pair_verdict`), by `stats.verdict`, the rule
`compare` uses. Pure: each point's repeat medians in, a dict out (harness.analysis.verdicts.sweep names the points
and words the decision).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.analysis import stats


def recommend_cap(
    figures_by_cap: dict[float, Sequence[float]],
    *,
    reference_cap: float = stats.REFERENCE_CAP_MB,
    threshold: float = stats.DEFAULT_THRESHOLD,
    confidence: float = stats.CONFIDENCE,
    aligned: bool = False,
) -> dict:
    """From each cap's repeat medians (`aligned`: the i-th of every cap ran in the same launch, so that from
    stats.PAIRED_FROM repeats on each cap is judged against the fastest launch by launch): the fastest cap,
    its interval, the caps it does not beat (how flat the optimum is), and the decision. Each rival is judged
    against the fastest by `stats.verdict`, the rule `compare` uses: 'recommend' only when the fastest is 'faster'
    than the reference cap (25 MiB: the value DDP uses when none is given) or, without it, than every other cap,
    that is significantly AND by at least the threshold; 'flat' when the repeats can tell it is not (one rival
    judged 'no significant change' is enough); 'too few repeats to tell' when they cannot tell which.

    `gain_vs_default` is the reference cap's step / the fastest's − 1. The reference is the cap
    the sweep measured at 25 MiB: given explicitly, as every cap of a sweep is, so on torch ≥ 2.9
    its first bucket is 25 MiB too, not the 1 MiB of DDP's layout when no cap is given."""
    centers = {cap: stats.center_interval(figures) for cap, figures in figures_by_cap.items()}
    best = min(centers, key=lambda cap: centers[cap][0])
    have = min(len(figures) for figures in figures_by_cap.values())
    paired = aligned and have >= stats.PAIRED_FROM
    judge = {"aligned": aligned, "threshold": threshold, "confidence": confidence}
    judged = {cap: cap_pair_verdict(figures, figures_by_cap[best], **judge) for cap, figures in figures_by_cap.items()
              if cap != best}  # fmt: skip
    words = {cap: found["verdict"] for cap, found in judged.items()}
    rivals = [reference_cap] if reference_cap in words else sorted(words)
    if all(words[cap] == stats.FASTER for cap in rivals):
        decision = stats.RECOMMEND
    elif any(words[cap] == stats.NO_CHANGE for cap in rivals):
        decision = stats.FLAT  # one rival the fastest surely does not beat rules a recommendation out
    elif any(words[cap] == stats.TOO_FEW for cap in rivals):
        decision = stats.TOO_FEW
    else:
        decision = stats.FLAT
    deciding = [judged[cap]["repeats_needed"] for cap in rivals]  # the most any verdict the decision rests on asks
    need = None if not deciding or None in deciding else max(deciding)
    if decision == stats.TOO_FEW and need is not None:
        need = max(need, have + 1)  # what is at hand did not decide: one more at least, as a verdict says
    reference, against = centers.get(reference_cap), judged.get(reference_cap)
    bounded = against is not None and bool(np.isfinite(against["low"]))
    runner = min(judged, key=lambda cap: centers[cap][0], default=None)  # the next behind the fastest
    behind = runner is not None and bool(np.isfinite(judged[runner]["low"]))
    return {
        "decision": decision,
        "best_cap_mb": best,
        "best_step_ms": centers[best][0],
        "best_ci_low_ms": centers[best][1],
        "best_ci_high_ms": centers[best][2],
        # Not beaten by the threshold: the caps 'flat: any of …' offers (every cap with one repeat).
        "equivalent_caps_mb": sorted(cap for cap in figures_by_cap if words.get(cap) != stats.FASTER),
        "gain_vs_default": reference[0] / centers[best][0] - 1 if reference else None,
        # At `confidence`, from the fastest's verdict against 25 MiB: at most what moving to it wins (null: none).
        "gain_low": 1 / against["high"] - 1 if bounded else None,
        "gain_high": 1 / against["low"] - 1 if bounded else None,
        # The next point behind the fastest: how far (its step / the fastest's − 1) and that ratio's interval.
        "next_cap_mb": runner,
        "next_gain": centers[runner][0] / centers[best][0] - 1 if runner is not None else None,
        "next_gain_low": 1 / judged[runner]["high"] - 1 if behind else None,
        "next_gain_high": 1 / judged[runner]["low"] - 1 if behind else None,
        "confidence": confidence,
        "repeats": have,
        "repeats_needed": need,
        "paired": paired,
    }


def cap_pair_verdict(
    base: Sequence[float], new: Sequence[float], *, aligned: bool, threshold: float, confidence: float
) -> dict:
    """Two caps of one sweep (`stats.verdict(base, new)`), as recommend_cap judges each rival against the fastest
    and the answer judges two caps: launch by launch from PAIRED_FROM repeats where they ran side by side
    (`aligned`). The repeats it needs are sized from this pair and the ratio seen, as `stats.verdict` sizes
    them: as independent sets while that decides before PAIRED_FROM, else launch by launch (never fewer than
    PAIRED_FROM, where pairing starts); one more at least while it is undecided."""
    have = min(len(base), len(new))
    paired = aligned and have >= stats.PAIRED_FROM
    judged = stats.verdict(base, new, threshold=threshold, confidence=confidence, paired=paired)
    judge = {"threshold": threshold, "confidence": confidence, "ratio": judged["ratio"]}
    need = stats.repeats_needed(stats.repeat_spread(base, new), **judge)
    if aligned and need is not None and need >= stats.PAIRED_FROM:
        together = stats.repeats_needed(stats.paired_spread((base, new)), paired=True, **judge)
        need = max(stats.PAIRED_FROM, together) if together is not None else need
    if judged["verdict"] == stats.TOO_FEW and need is not None:
        need = max(need, have + 1)
    return {**judged, "repeats_needed": need, "paired": paired}
