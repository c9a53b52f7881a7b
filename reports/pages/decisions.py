"""Under `--repeats auto`: how the run's answer formed, look by look (harness.analysis.decide.history)."""

from __future__ import annotations

import pandas as pd

from harness.analysis import decide, stats
from reports.pages.html import esc, table


def decided_text(row) -> str:
    """'after 2 repeats', or why not: open after N (what the evidence bounds so far, and how many repeats it
    would need)."""
    if pd.notna(row.decided_after):
        return f"after {int(row.decided_after)} repeats"
    needed = None if pd.isna(row.repeats_needed) else int(row.repeats_needed)
    so_far = getattr(row, "so_far", "")
    so_far = f"so far {so_far}; " if isinstance(so_far, str) and so_far else ""
    return f"open after {int(row.repeats)} repeats ({so_far}{stats.needed_text(needed)})"


def decisions_section(decisions: pd.DataFrame, config: dict) -> str:
    """'' unless the run repeated until decided; else when each verdict was decided, and the rule's looks."""
    if decisions.empty:
        return ""
    max_repeats = int(config.get("max_repeats") or decide.DEFAULT_MAX_REPEATS)
    looks = ", ".join(str(n) for n in decide.looks(max_repeats))
    confidence = decide.look_confidence(max_repeats)
    intro = (f"<p>--repeats auto judged the verdicts after {esc(looks)} repeats of each configuration still "
             f"open, each look at {confidence:.2%} confidence, so that all looks together call a change wrongly "
             f"at most {decide.ALPHA:.0%} of the time (docs/statistics.md). A decided verdict ran no more repeats "
             "unless an open one rested on the same configurations.</p>")  # fmt: skip
    ordered = decisions.sort_values(["decided", "decided_after", "subject"], ascending=[False, True, True])
    rows = [[esc(r.subject), esc(r.kind), esc(decided_text(r)), esc(r.word)] for r in ordered.itertuples()]
    classes = ["" if pd.notna(r.decided_after) else "open" for r in ordered.itertuples()]
    heading = "<h3 id=decided>When each verdict was decided</h3>"
    return heading + intro + table(["verdict", "kind", "decided", "verdict now"], rows, row_classes=classes)
