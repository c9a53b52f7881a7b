"""What `compare` prints: a line per matched configuration, its ratio, interval and verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.analysis import stats
from harness.analysis.verdicts.sweep import ratio_interval_text
from harness.commands.console import _print, say
from harness.results.values import ratio_number

if TYPE_CHECKING:
    import pandas as pd


def comparison(frame: pd.DataFrame, *, threshold: float) -> None:
    """A line per matched configuration: the ratio, its interval, the verdict, how many repeats a
    decision at the threshold needs when the runs had fewer, and any noise behind it; first, the intervals'
    level where several configurations share the gate's error."""
    from harness.analysis.verdicts.compare import family_words, interval_level

    level = interval_level(frame)
    if family := family_words(frame):
        say(f"compare: each interval at {level}{family}")
    for r in frame.itertuples():
        interval = "no interval: one repeat" if r.ratio_ci_low != r.ratio_ci_low else (  # both ends, as the page
            f"{level} CI {ratio_interval_text(r.ratio_ci_low, r.ratio_ci_high)}")  # fmt: skip  # not '<0.01->1000
        verdict = r.verdict
        if verdict == "too few repeats to tell":
            have = min(r.base_repeats, r.new_repeats)
            leaning = getattr(r, "leaning", "")
            so_far = f"{leaning} so far, not yet shown beyond {threshold * 100:g}%; " if leaning else ""
            verdict += f" ({so_far}have {have}; at {threshold * 100:g}%, {stats.needed_text(r.repeats_needed, have)})"
        noise = f" [{r.noise}]" if r.noise else ""
        _print(f"{_named(r)}: {r.base_ms:.2f} -> {r.new_ms:.2f} ms, ratio {r.ratio:.3f} ({interval}): "
               f"{verdict}{noise}")  # fmt: skip


def _named(r) -> str:
    """'w2 mlp/tiny stock': a matched configuration as its line names it (compare.named: the rule every line and page
    names a configuration by; the reference as shipped matched with its stand-in: both named)."""
    from harness.analysis.verdicts.compare import named

    return f"w{r.world_size} {r.workload}/{r.size} {named(r)}"


SHOWN_SLOWER = 3
"""Slower configurations the outcome line names, the slowest first, before '… and N more'."""


def slower_named(frame: pd.DataFrame) -> str:
    """': w2 mlp/tiny stock 3.65× (98.8% CI 1.43–9.32)': the configurations judged slower, slowest first, for the
    outcome line to say which, by how much and how sure, as a CI log's last line is read ('' where none is)."""
    from harness.analysis.verdicts.compare import interval_level

    slower = frame[frame["verdict"] == stats.SLOWER].sort_values("ratio", ascending=False) if len(frame) else frame
    said = [f"{_named(r)} {r.ratio:.2f}× ({interval_level(frame)} CI {ratio_number(r.ratio_ci_low)}–"
            f"{ratio_number(r.ratio_ci_high)})" for r in slower.head(SHOWN_SLOWER).itertuples()]  # fmt: skip
    more = f", and {len(slower) - SHOWN_SLOWER} more" if len(slower) > SHOWN_SLOWER else ""
    return f": {', '.join(said)}{more}" if said else ""


def open_named(frame: pd.DataFrame) -> str:
    """' (have 5, need up to 124 a run at the spread seen, for w1 mlp/tiny fsdp, 3 more than 1000: …; largest so far:
    w2 mlp/tiny stock 1.30×, need about 9; slower so far: w2 mlp/tiny bucketed 1.04×)': what would decide the
    configurations the repeats left open (whose the largest need is), the largest ratio among them (above 1: a
    3.7× regression hid behind another configuration's need of 372) with its own need, and which already lean slower,
    for the outcome line of a gate that exits 3, the one line a CI reader sees ('' where none is open)."""
    shut = frame[frame["verdict"] == stats.TOO_FEW] if len(frame) else frame
    if shut.empty:
        return ""
    have = int(shut[["base_repeats", "new_repeats"]].min(axis=1).min())
    needs = shut["repeats_needed"].dropna()
    within = needs[needs < stats.MAX_REPEATS]
    rows = {r.Index: r for r in shut.itertuples()}  # named tuples: a Series' .size is its length, not the model's
    neediest = rows[within.idxmax()] if len(within) else None
    said = [f"have {have}"] + ([f"need up to {int(within.max())} a run at the spread seen, for {_named(neediest)}"]
                               if neediest is not None else [])  # fmt: skip
    if beyond := len(shut) - len(within):  # at the cap, or no estimate at all
        said.append(f"{beyond} more than {stats.MAX_REPEATS}: the repeats differ far beyond the threshold")
    largest = rows[shut["ratio"].idxmax()]
    leaning = shut[shut["leaning"] == "slower"] if "leaning" in shut else shut.iloc[:0]
    notes = []
    if largest.ratio > 1:  # a regression candidate, named with what would decide it
        own = "" if neediest is not None and largest.Index == neediest.Index else (
            f", {stats.needed_text(largest.repeats_needed)}")  # fmt: skip
        notes.append(f"largest so far: {_named(largest)} {largest.ratio:.2f}×{own}")
        leaning = leaning.drop(index=largest.Index, errors="ignore")
    if len(leaning):
        notes.append("slower so far: " + ", ".join(f"{_named(r)} {r.ratio:.2f}×" for r in leaning.itertuples()))
    return f" ({'; '.join([', '.join(said), *notes])})"


def memory_regressions(frame: pd.DataFrame) -> None:
    """A line per configuration whose peak memory per rank is significantly higher in NEW (memory_compare), those
    that fail nothing (another strategy's, `--across-strategies`) said so."""
    from harness.analysis.verdicts import memory_compare
    from harness.analysis.verdicts.compare import interval_level

    for gating in (True, False):  # the regressions, then where the runs' strategies differ: said, failing nothing
        for r in memory_compare.higher(frame, gating=gating).itertuples():
            _print(memory_compare.regression_line(r, named=_named(r), level=interval_level(frame)))
