"""The 'comm. hidden' share's bounds: where late completions (gloo on CUDA) make it an upper bound, where
all-gathers that hold compute up make it a lower one, and where at one rank there is nothing to hide; and where a
compression hook's time in flight holds its casts. Pure: a strategy's rows in, words and cells out."""

from __future__ import annotations

import pandas as pd

from harness.results.values import casts_counted_part
from reports.pages.html import esc

LATE_COMPLETIONS = "completions late"
"""The words of the `comm_note` a rank writes where gloo runs on CUDA (harness/rank/configuration.py's
GLOO_ON_CUDA; the reports read the results, not the rank's code): gloo marks its work done on the compute
stream, so each collective counts as in flight until compute could use its result."""


UPPER_BOUND = "upper bound: gloo on CUDA completes on the compute stream"


HIDDEN_LOWER = "hidden share a lower bound"
"""The words of the `comm_note` of a strategy whose stamps count every collective as holding compute up from its
launch (impls/fsdp.py's ALL_GATHERS_BLOCK, on a GPU): its hidden share reads low."""


NOTHING_TO_HIDE = "nothing to hide at one rank"


NEGLIGIBLE_COMM = 0.01
"""Communication under this share of the step: what share of it is hidden is noise."""


def completions_late(rows: pd.DataFrame) -> bool:
    """Whether any of a strategy's rows (its repeats) timed its collectives with late completions (gloo on CUDA)."""
    return _noted(rows, LATE_COMPLETIONS)


def hidden_at_least(rows: pd.DataFrame) -> bool:
    """Whether any of a strategy's rows says its hidden share is a lower bound (fsdp's all-gathers on a GPU)."""
    return _noted(rows, HIDDEN_LOWER)


def _noted(rows: pd.DataFrame, words: str) -> bool:
    return any(isinstance(note, str) and words in note for note in rows.get("comm_note", []))


def nothing_to_hide(row: pd.Series) -> bool:
    """Whether a pooled row (pooled.ranked) communicates nothing worth a share hidden: at one rank NCCL moves no
    byte (what is timed is the launches: 0.05 ms of a 55 ms step, 0 % or 91 % hidden by chance), nor does any
    backend whose communication is a sliver of the step; gloo on CUDA still copies host↔device, which stays."""
    comm = row.get("comm_ms")
    if row.get("world_size") != 1 or comm is None or pd.isna(comm):
        return False
    return row.get("backend") == "nccl" or comm < NEGLIGIBLE_COMM * row["step_ms"]


def hidden_cell(row: pd.Series) -> str:
    """The answer's 'comm. hidden' cell: the share, '(upper bound)' where completions were late, '(lower bound)'
    where every all-gather counted as holding compute up, or that at one rank there is nothing to hide."""
    overlap = row.get("overlap_efficiency")
    if overlap is None or pd.isna(overlap):
        return "—"
    if nothing_to_hide(row):
        return "nothing to hide"  # the table's heading names its one rank
    bound = " (upper bound)" if row.get("comm_late") else (" (lower bound)" if row.get("hidden_low") else "")
    return f"{overlap:.0%}{bound}"


def late_note(group: pd.DataFrame) -> str:
    """A note under an answer table whose 'comm. hidden' cells rest on late completions (gloo on CUDA)."""
    if "comm_late" not in group or not group["comm_late"].any():
        return ""
    return ('<p class="banner warning"><b>Upper bound:</b> gloo on CUDA completes its collectives on the compute '
            "stream, so each counts as done only when compute could use its result: communication, and the share "
            "of it hidden behind compute, read high (the configurations' <code>comm_note</code>).</p>")  # fmt: skip


def casts_note(rows: pd.DataFrame) -> str:
    """A note beside the communication figures where a compression hook's casts are inside its time in flight (the
    rows' `comm_note`, the words the console's line quotes): bf16 read 304 ms for 16 MiB beside stock's 247 for 32.1."""
    said = dict.fromkeys(casts_counted_part(note) for note in rows.get("comm_note", []))
    return "".join(f"<p class=note>{esc(part[0].upper() + part[1:])}.</p>" for part in said if part)
