"""`compare`'s memory verdicts: did a matched configuration need significantly more memory per rank?

Each repeat gives one figure, its peak per rank (the largest rank's): on a GPU the torch allocator's peak
*reserved* memory (`mem_peak_reserved_mb`: what the rank took from the device, its tensors and the cache's
fragmentation, which is what runs out first; the allocated peak leaves the cache out, NVML's peak adds the CUDA
context and, device-wide, other processes'); on the CPU the process's peak resident set (`mem_peak_rss_mb`).
The repeats' peaks are judged like the step times (`stats.verdict`: Welch's t on the logs, at the comparison's
family-wise confidence) against their own threshold (`--memory-threshold`, 5 % by default): 'higher' where the
interval lies beyond it, a memory regression that fails the gate as a slower step does. Memory is nearly
deterministic: repeats that agree exactly on each side give a zero-width interval at their ratio (an exact
equality is no change, a ratio beyond the threshold higher), never a division by zero. A configuration whose
peaks were not recorded in both runs gets no memory verdict; memory that cannot be told apart holds no gate open
(the step time decides whether it passes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis import stats

DEFAULT_MEMORY_THRESHOLD = 0.05
"""The smallest growth of a rank's peak memory that counts: 5 %, as for step time."""
PEAK_COLUMNS = {"cuda": "mem_peak_reserved_mb", "cpu": "mem_peak_rss_mb"}
"""The one figure per device that says what a rank needs (see the module's docstring for why)."""
PEAK_WORDS = {"mem_peak_reserved_mb": "peak reserved (device)", "mem_peak_rss_mb": "peak RSS (process)"}
HIGHER, LOWER = "higher", "lower"
MEMORY_REGRESSED = "more memory"
"""The outcome's word where memory failed the gate (gate_outcome.FAILED_WORDS)."""
WORDS = {stats.SLOWER: HIGHER, stats.FASTER: LOWER}  # the step verdict's words said of memory


def with_peaks(configs: pd.DataFrame) -> pd.DataFrame:
    """`configs` with `peak_mb` (each row's figure, NaN where not recorded) and `peak_column` (which it is)."""
    column = configs["device"].map(PEAK_COLUMNS) if "device" in configs else pd.Series(None, index=configs.index)
    peaks = [row.get(c, np.nan) if isinstance(c, str) else np.nan for row, c in zip(configs.to_dict("records"),
                                                                                    column, strict=True)]  # fmt: skip
    return configs.assign(peak_mb=pd.to_numeric(pd.Series(peaks, index=configs.index)), peak_column=column)


def judge(base: pd.DataFrame, new: pd.DataFrame, *, threshold: float, confidence: float, gates: bool = True) -> dict:
    """One matched configuration's memory: the geometric mean of its repeats' peaks in each run, their ratio, its
    interval and the verdict ('higher', 'lower', 'no significant change', 'too few repeats to tell'), or no verdict
    (None) where either run did not record the figure (or recorded another one). `gates`: False where the runs
    measured different configurations (`--across-strategies`): another strategy's memory is no regression, said
    (`mem_gates`) but failing nothing."""
    before, after = _peaks(base), _peaks(new)
    columns = set(base.get("peak_column", pd.Series(dtype=object)).dropna()) | set(
        new.get("peak_column", pd.Series(dtype=object)).dropna()
    )
    if not len(before) or not len(after) or len(columns) != 1:
        return {"mem_column": None, "mem_verdict": None, "mem_threshold": threshold, "mem_gates": gates}
    judged = stats.verdict(before, after, threshold=threshold, confidence=confidence)
    return {
        "mem_column": columns.pop(), "mem_base_mb": stats.geometric_mean(before),
        "mem_new_mb": stats.geometric_mean(after), "mem_ratio": judged["ratio"], "mem_ci_low": judged["low"],
        "mem_ci_high": judged["high"], "mem_verdict": WORDS.get(judged["verdict"], judged["verdict"]),
        "mem_threshold": threshold, "mem_gates": gates,
    }  # fmt: skip


def _peaks(rows: pd.DataFrame) -> list[float]:
    """The repeats' recorded peaks (a null or a non-positive figure is not a measurement)."""
    peaks = pd.to_numeric(rows["peak_mb"], errors="coerce") if "peak_mb" in rows else pd.Series(dtype=float)
    return [float(p) for p in peaks if p == p and p > 0]


def higher(frame: pd.DataFrame, *, gating: bool = True) -> pd.DataFrame:
    """The rows whose peak memory is significantly higher in NEW, the largest growth first: those that fail the gate
    (`gating`), or those of different configurations, which fail nothing (`gating=False`)."""
    rows = frame[frame["mem_verdict"] == HIGHER] if "mem_verdict" in frame else frame.iloc[:0]
    rows = rows[gates(rows) == gating]
    return rows.sort_values("mem_ratio", ascending=False) if len(rows) else rows  # none recorded: no mem_ratio


def gates(rows: pd.DataFrame) -> pd.Series:
    """Per row, whether its memory verdict gates (a comparison kept before `mem_gates`: every one did)."""
    kept = rows["mem_gates"] if "mem_gates" in rows else pd.Series(True, index=rows.index)
    return kept.map(lambda value: value is not False)


NOT_GATED = "another strategy's memory, not gated"
"""What a memory verdict across strategies is said with: the strategy's, not a regression (it fails nothing); one
strategy's pair, at the same options or another setting of them, gates."""


def regression_line(row, *, named: str, level: str) -> str:
    """'w2 mlp/tiny stock: peak RSS (process) 512.0 -> 563.2 MiB, ratio 1.100 (99.2% CI 1.08–1.12): higher, beyond
    5%': one memory regression, as the console says it; one across strategies says it fails nothing (NOT_GATED)."""
    apart = "" if getattr(row, "mem_gates", True) is not False else f", {NOT_GATED}"
    return (f"{named}: {PEAK_WORDS.get(row.mem_column, row.mem_column)} {row.mem_base_mb:.1f} -> "
            f"{row.mem_new_mb:.1f} MiB, ratio {row.mem_ratio:.3f} ({level} CI {row.mem_ci_low:.3f}–"
            f"{row.mem_ci_high:.3f}): {HIGHER}, beyond {row.mem_threshold * 100:g}%{apart}")  # fmt: skip
