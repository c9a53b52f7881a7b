"""The comparison page's memory section: per matched configuration, its peak memory per rank in each run,
the ratio, its interval and the verdict (harness.analysis.verdicts.memory_compare judges them)."""

from __future__ import annotations

import pandas as pd

from harness.analysis.verdicts import compare as comparing
from harness.analysis.verdicts import memory_compare
from reports.pages.html import esc, table


def memory_section(frame: pd.DataFrame, label) -> str:
    """'' where no row has a memory verdict (a comparison kept before memory was judged, or none recorded);
    `label`: how the page names a configuration."""
    if "mem_verdict" not in frame or not frame["mem_verdict"].notna().any():
        return ""
    rows, classes = [], []
    judged = frame[frame["mem_verdict"].notna()]
    for r, gating in zip(judged.itertuples(), memory_compare.gates(judged), strict=True):
        failed = r.mem_verdict == memory_compare.HIGHER and gating  # another strategy's: said, failing nothing
        verdict = r.mem_verdict + ("" if gating else f" ({memory_compare.NOT_GATED})")
        rows.append([esc(label(r)), esc(memory_compare.PEAK_WORDS.get(r.mem_column, r.mem_column)),
                     f"{r.mem_base_mb:.1f}", f"{r.mem_new_mb:.1f}", f"{r.mem_ratio:.3f}",
                     f"{r.mem_ci_low:.3f}–{r.mem_ci_high:.3f}" if pd.notna(r.mem_ci_low) else "—",
                     f"<b>{esc(verdict)}</b>" if failed else esc(verdict)])  # fmt: skip
        classes.append("failed" if failed else "")
    level, threshold = comparing.interval_level(frame), frame["mem_threshold"].dropna().iloc[0]
    head = ["configuration", "figure", "base MiB", "new MiB", "ratio", f"{level} interval", "verdict"]
    return (
        f"<h2>Peak memory per rank</h2><p>Per repeat the largest rank's peak: on a GPU the allocator's peak reserved "
        f"memory (what a rank took from the device), on the CPU the process's peak resident set; the geometric mean "
        f"over repeats. <b>higher</b> (a regression: the gate fails where both sides ran one strategy, at the same "
        f"options or not; between different strategies (--across-strategies) it is said and fails nothing) "
        f"when the {level} interval of new / base lies beyond {threshold * 100:g}% (--memory-threshold), judged as the "
        f"step times are; repeats that agree exactly "
        f"give a zero-width interval.</p>" + table(head, rows, row_classes=classes)
    )
