"""What `compare` prints: a line per matched configuration, its ratio, interval and verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.analysis import stats
from harness.commands.console import _print, options_text, say
from harness.results.values import ratio_number

if TYPE_CHECKING:
    import pandas as pd


def comparison(frame: pd.DataFrame, *, threshold: float) -> None:
    """A line per matched configuration: the ratio, its interval, the verdict, how many repeats a
    decision at the threshold needs when the runs had fewer, and any noise behind it; first, the intervals'
    level where several configurations share the gate's error."""
    from harness.analysis.compare import family_words, interval_level

    level = interval_level(frame)
    if family := family_words(frame):
        say(f"compare: each interval at {level}{family}")
    for r in frame.itertuples():
        interval = "no interval: one repeat" if r.ratio_ci_low != r.ratio_ci_low else (  # both ends, as the page
            f"{level} CI {ratio_number(r.ratio_ci_low)}-{ratio_number(r.ratio_ci_high)}")  # fmt: skip  # not 124708.818
        verdict = r.verdict
        if verdict == "too few repeats to tell":
            have = min(r.base_repeats, r.new_repeats)
            leaning = getattr(r, "leaning", "")
            so_far = f"{leaning} so far, not yet shown beyond {threshold * 100:g}%; " if leaning else ""
            verdict += f" ({so_far}have {have}, {stats.needed_text(r.repeats_needed)} at {threshold * 100:g}%)"
        noise = f" [{r.noise}]" if r.noise else ""
        paired = getattr(r, "paired", None)  # the reference as shipped matched with its stand-in: both named
        strategy = paired if isinstance(paired, str) else f"{r.impl}{options_text(r.impl_options)}"
        _print(f"w{r.world_size} {r.workload}/{r.size} {strategy}: {r.base_ms:.2f} -> "
              f"{r.new_ms:.2f} ms, ratio {r.ratio:.3f} ({interval}): {verdict}{noise}")  # fmt: skip
