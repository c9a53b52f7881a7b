"""Drift: a repeat's step level moving within its measured window (warm-up not over, clocks ramping, a
library's first-N-iterations behaviour, such as DDP waiting for the device in its first 11 forwards on
CUDA). Its median is then of neither level, and the CV barely shows it: a 4 % shift in 2 of 12 steps
keeps the CV near 0.02. Pure functions of a repeat's steps in step order (docs/statistics.md)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DRIFT_FLOOR = 0.02
"""The smallest drift flagged, however steady the steps: a smaller shift moves no verdict worth a note."""
DRIFT_Z = 3.0
"""And it must exceed this many of its standard errors: iid normal steps with no drift (CV 5–10 %) are flagged
in 3 % of repeats at 6 steps, 2 % at 10, 1 % at 20 (docs/statistics.md; tests/analysis/test_drift.py)."""
MIN_DRIFT_STEPS = 6  # what a drift needs: a first half and a last quarter of three steps each, apart
DRIFT_TAIL_STEPS = 3  # the end's level is a median of three steps at least: one odd last step moves none
MEDIAN_SE = float(np.sqrt(np.pi / 2))  # a median's standard error over a mean's, for normal steps
MAD_TO_SD = 1.4826  # a median absolute deviation to a standard deviation, for normal steps


def step_drift(steps_ms: Sequence[float]) -> dict[str, float | None]:
    """How far a repeat's step level moved within its measured window, from its steps in step order.

    `drift` = median of the last quarter of the steps (at least DRIFT_TAIL_STEPS) / median of the first
    half − 1: −0.04 when the steps at the end are 4 % faster than at the start. `drift_se`, its standard
    error (relative to the first half's median), is √(π/2)·σ·√(1/first + 1/last) with σ from the median
    absolute difference of successive steps: a level shift changes one difference, so the shift being
    measured does not inflate its own yardstick. Both None under MIN_DRIFT_STEPS steps."""
    values = np.asarray(steps_ms, dtype=float)
    first = values[: values.size // 2]
    last = values[values.size - max(DRIFT_TAIL_STEPS, values.size // 4) :]
    start = float(np.median(first)) if values.size >= MIN_DRIFT_STEPS else float("nan")
    if not start > 0:
        return {"drift": None, "drift_se": None}
    sd = MAD_TO_SD * float(np.median(np.abs(np.diff(values)))) / np.sqrt(2)  # a difference has twice the variance
    se = MEDIAN_SE * sd * np.sqrt(1 / first.size + 1 / last.size) / start
    return {"drift": float(np.median(last)) / start - 1, "drift_se": float(se)}


def drift_flagged(drift: float | None, se: float | None) -> bool:
    """Whether a repeat's drift is one to flag: at least DRIFT_FLOOR and beyond DRIFT_Z standard errors."""
    known = drift is not None and se is not None and np.isfinite(drift) and np.isfinite(se)
    return known and abs(drift) >= DRIFT_FLOOR and abs(drift) > DRIFT_Z * se


def drift_note(drifts: Sequence[float | None], ses: Sequence[float | None]) -> str:
    """'steps drift -4.6% within the window (more --warmup)' when most of a configuration's repeats whose
    drift is known are flagged (drift_flagged): the median of their drifts, or their range where some
    rose and some fell; '' otherwise (no drift known: an older run, too few steps). More warm-up is the
    remedy only for steps that got faster: ones that slowed down are the machine's (clocks, heat, memory)."""
    pairs = [(d, s) for d, s in zip(drifts, ses, strict=True) if d is not None and np.isfinite(d)]
    flagged = [d for d, s in pairs if drift_flagged(d, s)]
    if 2 * len(flagged) <= len(pairs):
        return ""
    mixed = min(flagged) < 0 < max(flagged)
    said = f"{min(flagged):+.1%} to {max(flagged):+.1%}" if mixed else f"{np.median(flagged):+.1%}"
    return f"steps drift {said} within the window" + (" (more --warmup)" if max(flagged) < 0 else "")
