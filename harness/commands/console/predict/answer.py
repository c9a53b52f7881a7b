"""The choice as a table, first (one cluster's, said ahead of the lines it rests on; several clusters', under each
one's prediction, after the bookings compared): per GPU count, the strategy to book, its step, the
fastest of the rest that fits and how far behind it is, and what the pick rests on
(harness.perfmodel.pick.choice_table.noted_rows, which the what-if page shows in full too); each note's shared words
said once under the table, with its figure at each GPU count, so that the rows stay a terminal's width."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from harness.analysis import roles
from harness.commands.console import said_ahead, say, say_once
from harness.perfmodel.memory_words import unchosen_words
from harness.perfmodel.own_check import unborne_words
from harness.perfmodel.pick.choice_table import (
    COST,
    chosen,
    noted_rows,
    table_header,
    tokens_a_step,
    with_peak_column,
    without_blank_columns,
)

if TYPE_CHECKING:
    import pandas as pd

FIGURES = ("GPUs", "step ms", "peak GiB", "behind", "GPU-h per")
"""The columns of figures, aligned right, known by their header's words (a column blank on every row is dropped)."""
WIDTH = 120
"""The widest row the table may print (a terminal's width with room): past it, the notes are marks, their words
under the table."""


def choice_table(state: pd.DataFrame, capacity_gib: float, frames: list[pd.DataFrame], *, cluster_name: str,
                 optimizer_ms: float = 0.0, step_ms: float = 0.0, errors=None, batch: int | None = None,
                 caveat: str = "", batch_note: str = "", other_end: tuple | None = None) -> bool:  # fmt: skip
    """Say the table (`state` labelled by `strategy`, as choice_words takes it), its notes under it, then what the
    choice leaves out (unchosen.unchosen_words), where the run's optimizer leaves a sharding strategy nothing to shard
    that its memory and step are that optimizer's (roles.shards_nothing_words), `caveat` and `batch_note`; nothing
    where there is no choice; whether said. `batch`: a GPU's samples a step, as the steps are (their GPU-hours a
    million samples); `batch_note`: which batch that is (run_batch_caveat), the run's words, said once over several
    clusters (console.say_once). A CPU's steps, with no GPU step given, have no such table (scaling.steps_known).
    `other_end`: where the step is bounded (a step measured on another GPU), the two ends' names, this end's first,
    and the other end's rows: a pick booked at both spans its step and GPU-hours to the other end's (an H200's
    'fsdp ≥54.64', the memory-bound end alone, led with its least likely end for a step at 43 % of its peak)."""
    made = chosen(state, frames, capacity_gib, errors, optimizer_ms)  # once: the table and what it leaves out say it
    rows = noted_rows(state, frames, capacity_gib, optimizer_ms=optimizer_ms, step_ms=step_ms, errors=errors,
                      batch=batch, made=made)  # fmt: skip
    if not rows:
        return False
    header = table_header(cost=bool(batch), tokens=tokens_a_step(state) is not None)
    spanned = ""
    if other_end is not None:
        rows, spanned = _to_other_end(rows, other_end, state, capacity_gib, errors=errors, batch=batch)
    rows = [((*cells[:1], book_cell(cells[1]), *cells[2:]), notes) for cells, notes in rows]
    # whether it fits, beside the step it is booked at; a table too wide for it says it in a line under it instead
    plain, (header, table, footnotes), peaks = header, _laid_out(*_with_peak(header, rows, made[0], capacity_gib)), ""
    if max(map(len, _lines(header, table))) > WIDTH:
        (header, table, footnotes), peaks = _laid_out(plain, rows), _peaks_line(made[0], capacity_gib)
    floored = "; ≥: the full size's floor ranks it" * any("≥" in cells[2] for cells, _ in rows)  # (none: unsaid)
    unborne = f"; {words}, see below" if (words := unborne_words(errors)) else ""
    where = "below" if said_ahead() else "above"  # one cluster's: said first, ahead of the memory it counted
    said = f" ({words[2:]})" if (words := floored + unborne + spanned) else ""
    say(f"ddpbench predict: the answer on {cluster_name}, the fastest step of what fits {capacity_gib:g} GiB a GPU as "
        f"counted {where}{said}:")  # fmt: skip
    for line in [*_lines(header, table), peaks]:
        if line:
            say(line)
    for k, ((short, rest), figures) in enumerate(footnotes.items(), start=1):
        bare = ", ".join(f"w{gpus}" for gpus, figure in figures if not figure)  # named all the same, after
        said = [f"w{gpus} {figure}" for gpus, figure in figures if figure] + [bare] * bool(bare)
        each = f" ({'; '.join(said)})" if any(f for _, f in figures) else f" (w{', w'.join(g for g, _ in figures)})"
        if len(figures) > 1 and figures[0][1] and len({figure for _, figure in figures}) == 1:  # alike: said once
            each = f" (w{', w'.join(gpus for gpus, _ in figures)}: {figures[0][1]})"
        say(f"  [{k}] {short}{each}{': ' + rest if rest else ''}")
    for words in (*unchosen_words(state, made[0], capacity_gib), roles.shards_nothing_words(state), caveat):
        if words:
            say_once(f"  {words}")  # several clusters: a word the same on each said with the first
    if batch_note:
        say_once(f"  {batch_note}")
    return True


def _to_other_end(rows: list[tuple], other_end: tuple, state, capacity_gib: float, *, errors,
                  batch) -> tuple[list[tuple], str]:  # fmt: skip
    """`rows` with each pick's step (and GPU-hours) spanned to the other end's where that end books the same pick at
    its GPU count; and the header's words for the end(s) its rows are at: '' where every row is the same at both
    ends, else the end each is at (a row the other end books otherwise is this end's alone: it once went unsaid, its
    range read as the bookings' of both ends)."""
    here, there, other_rows = other_end
    frames = [frame.reset_index(drop=True) for _, frame in other_rows.groupby("world_size", sort=True)]
    theirs = {cells[0]: cells for cells, _ in noted_rows(state, frames, capacity_gib, errors=errors, batch=batch)}
    figures = (2, COST) if batch else (2,)
    out, spanned, alone = [], False, False
    for cells, notes in rows:
        other = theirs.get(cells[0])
        if other is not None and other[1] == cells[1] and cells[2]:
            cells = tuple(_spanned(cell, other[k]) if k in figures else cell for k, cell in enumerate(cells))
            spanned = spanned or cells[2] != other[2]
        alone = alone or other is None or other[1] != cells[1]
        out.append((cells, notes))
    if not alone:
        return out, f"; a range: the step's {here} end to its {there} end, the rest at the {here} end" * spanned
    if not spanned:
        return out, f"; at the step's {here} end, the {there} end's below"
    return out, f"; a range: the step's {here} end to its {there} end where both book the same, else its {here} end"


def _laid_out(header: tuple, rows: list[tuple]) -> tuple[tuple, list[tuple], dict]:
    """The header, the rows as said and their footnotes (_marked): each note's short words in its row, or where they
    would take a row past WIDTH, its mark alone; a column blank on every row left out."""
    table, footnotes = _marked(rows, marks_only=False)
    if max(map(len, _lines(header, table))) > WIDTH:  # the notes' words too wide beside the figures: marks alone
        table, footnotes = _marked(rows, marks_only=True)
        header = (*header[:-1], "rests on")  # over marks: the header's words no wider than needed
    header, table = without_blank_columns(header, table)
    return header, table, footnotes


def _peaks_line(choices: list, capacity_gib: float) -> str:
    """'  peak GiB a rank (of 79.11): w8 stock 6.12, fsdp 5.61; w16 …', the peak column's figures for a table too wide
    to hold it; '' where nothing fits."""
    said = [f"w{c.world_size} " + ", ".join(f"{p.strategy} {p.need_mb / 1024:.3g}" for p in c.picked)
            for c in choices if c.picked]  # fmt: skip
    return f"  peak GiB a rank (of {capacity_gib:g}): " + "; ".join(said) if said else ""


def _with_peak(header: tuple, rows: list[tuple], choices: list, capacity_gib: float) -> tuple[tuple, list[tuple]]:
    """`rows` ((cells, notes)) with each pick's peak a rank beside its step, as the what-if page's table has it: the
    question a booking is asked first ('does batch 64 fit?') answered in the table, not a screen below it."""
    header, cells = with_peak_column(header, [cells for cells, _ in rows], choices, capacity_gib)
    header = tuple("peak GiB" if name.startswith("peak GiB") else name for name in header)  # its GPU: said above
    return header, [(row, notes) for row, (_, notes) in zip(cells, rows, strict=True)]


def _spanned(cell: str, other: str) -> str:
    """'≥54.64–80.32' of '≥54.64' and '≥80.32': the least figure of the two cells to the most, as each wrote it."""
    figures = re.findall(r"[\d,]*\.?\d+(?:e[+-]?\d+)?", cell + " " + other)
    if not figures:
        return cell
    ranked = sorted(figures, key=lambda text: float(text.replace(",", "")))
    return "≥" * ("≥" in cell + other) + "–".join(dict.fromkeys((ranked[0], ranked[-1])))


def _marked(rows: list[tuple], *, marks_only: bool) -> tuple[list[tuple], dict]:
    """The table's rows, each note in its last cell as its short words and a footnote's mark ('a tie [1]'), or with
    `marks_only` as the mark alone ('[1]'), its words under the table; and the footnotes: {(short, rest): [(GPUs,
    figure), …]}. A note said whole in its cell (no rest, no figure) has no footnote unless `marks_only`."""
    footnotes: dict[tuple[str, str], list[tuple[str, str]]] = {}
    table = []
    for cells, notes in rows:
        marks = []
        for note in notes:
            if not note.rest and not note.figure and not marks_only:  # said whole in its cell: short already
                marks.append(note.short)
                continue
            footnotes.setdefault((note.short, note.rest), []).append((cells[0], note.figure))
            mark = f"[{list(footnotes).index((note.short, note.rest)) + 1}]"
            marks.append(mark if marks_only else f"{note.short} {mark}")
        table.append((*cells, (" " if marks_only else "; ").join(marks)))
    return table, footnotes


def book_cell(cell: str) -> str:
    """'stock or zero at 25 MiB' for a tie's 'stock at 25 MiB or zero at 25 MiB' (the page's cell): the cap said once
    where every strategy tied is at it."""
    picks = cell.split(" or ")
    caps = {pick.rpartition(" at ")[2] for pick in picks}
    if len(picks) < 2 or len(caps) > 1 or not all(pick.endswith(" MiB") for pick in picks):
        return cell
    return " or ".join(pick.rpartition(" at ")[0] for pick in picks) + f" at {caps.pop()}"


def _lines(header: tuple[str, ...], table: list[tuple]) -> list[str]:
    """The header and rows as said: the figures right, the words left, the last cell as it is."""
    widths = [max(len(row[k]) for row in (header, *table)) for k in range(len(header))]
    right = {k for k, name in enumerate(header) if name.startswith(FIGURES)}  # by name: a blank column dropped
    lines = []
    for row in (header, *table):
        cells = [cell.rjust(width) if k in right else cell.ljust(width) for k, (cell, width) in
                 enumerate(zip(row, widths, strict=True))]  # fmt: skip
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def run_batch_caveat(batch: int | None, *, step_given: bool, batch_given: bool) -> str:
    """Where a GPU step was given (--local-step-ms) without the batch it was timed at (--batch-size), the GPU-hours
    and the samples (tokens) a second divide it by the run's batch a GPU, which may not be the step's: said, with the
    flag that gives the step's; '' where --batch-size was given (even the run's own: it once asked for the flag
    given) or the steps are the run's own."""
    if not step_given or batch_given or not batch:
        return ""
    return f"a GPU's samples a step: {batch}, the run's batch; a step given timed at another: --batch-size N"
