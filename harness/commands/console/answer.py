"""The choice as a table, said after its long form, where a terminal leaves it in sight: per GPU count, the strategy
to book, its step, the fastest of the rest that fits and how far behind it is, and what the pick rests on
(harness.perfmodel.choice_table.table_rows; its `choice_words`, the line before the table and the what-if page's, say
every step and caveat in full)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.commands.console import say
from harness.perfmodel.choice_table import COST, table_header, table_rows
from harness.perfmodel.sharded import unborne_words

if TYPE_CHECKING:
    import pandas as pd

RIGHT = (0, 2, 4, 5)
"""The columns of figures, aligned right."""


def choice_table(state: pd.DataFrame, capacity_gib: float, frames: list[pd.DataFrame], *, cluster_name: str,
                 optimizer_ms: float = 0.0, step_ms: float = 0.0, errors=None,
                 cpu_steps: bool = False, batch: int | None = None) -> None:  # fmt: skip
    """Say the table (`state` labelled by `strategy`, as choice_words takes it); nothing where there is no choice.
    `cpu_steps`: the steps are a CPU's compute (no --local-step-ms), which its step column says, and the table has no
    GPU-hours column then; `batch`: a GPU's samples a step, as the steps are (their GPU-hours a million samples)."""
    rows = table_rows(state, frames, capacity_gib, optimizer_ms=optimizer_ms, step_ms=step_ms, errors=errors,
                      batch=None if cpu_steps else batch)  # fmt: skip
    if not rows:
        return
    header = table_header(cpu_steps, cost=bool(batch) and not cpu_steps)
    widths = [max(len(row[k]) for row in (header, *rows)) for k in range(len(header) - 1)]
    unborne = f"; {words}, see below" if (words := unborne_words(errors)) else ""
    say(f"ddpbench predict: the answer on {cluster_name}, the fastest step of what fits {capacity_gib:g} GiB a GPU "
        f"(≥: the full size's floor ranks it; the line above says each step and what it rests on"
        f"{unborne}):")  # fmt: skip
    for row in (header, *rows):
        right = RIGHT if len(header) > COST + 1 else RIGHT[:-1]  # the GPU-hours: the last figures, where given
        cells = [cell.rjust(width) if k in right else cell.ljust(width) for k, (cell, width) in
                 enumerate(zip(row, widths, strict=False))]  # fmt: skip
        say("  " + "  ".join([*cells, row[-1]]).rstrip())
