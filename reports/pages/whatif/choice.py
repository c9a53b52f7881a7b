"""The what-if page's choice: per GPU count, the fastest of what fits one GPU there, as the console's table says it
(perfmodel.pick.choice_table), its caveats in sight under it and the same choice in words folded, in `predict
--cluster`'s words."""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles
from harness.perfmodel.clusters import whole_run
from harness.perfmodel.clusters.bookings import of_cluster
from harness.perfmodel.clusters.cluster import Cluster
from harness.perfmodel.clusters.published import cap_caveats, checked_table
from harness.perfmodel.measured import of_setup
from harness.perfmodel.memory import state_per_rank
from harness.perfmodel.own_check import OwnCheck, unborne_words
from harness.perfmodel.pick import failed as gone
from harness.perfmodel.pick import parity, ranked
from harness.perfmodel.pick.choice_table import (
    chosen,
    table_header,
    table_rows,
    tokens_a_step,
    with_peak_column,
    without_blank_columns,
)
from harness.perfmodel.pick.words import choice_words
from harness.perfmodel.sharded import optimizer_break_even, optimizer_share_caveat
from harness.results.values import strategy_labels
from reports.pages.html import esc, table
from reports.pages.whatif.memory import setup_of


def _misses(cluster: Cluster, group: pd.DataFrame, frames: list[pd.DataFrame]) -> str:
    """The published tables' misses where they could move the cap named, at the node counts whose table the answer
    above leaves out: it says the most GPUs' (profile.caveat), which a page with one node count said twice."""
    if not ranked.miss_could_move_cap(frames):
        return ""
    nodes = sorted({int(n) for n in group["nodes"]})
    rest = [n for n in nodes if checked_table(cluster, n) != checked_table(cluster, nodes[-1])]
    return cap_caveats(cluster, rest) if rest else ""


def choice_section(configs: pd.DataFrame, group: pd.DataFrame, cluster: Cluster, worlds: list[int], *,
                   rows: pd.DataFrame | None = None, checked: OwnCheck | None = None, booked: dict | None = None,
                   run: tuple[float, float | None] | None = None) -> str:  # fmt: skip
    """The choice over both halves for this setup, in `predict --cluster`'s words (words.choice_words): the
    fastest predicted step at each GPU count among the strategies whose memory fits (counted from `rows`, the
    setup's rows as `predict` counts them, default its rows of `configs`; `checked`: the step models' errors on the
    run's own steps, as predict weighs them); '' where nothing is said. `booked`: given, its "row" is set to the
    table's row at the most GPUs, what the page's head says it books (html.BOOK_MARK). `run`: predict's
    --train-samples and its price a GPU-hour (None: not given), the whole run's columns (`with_run`)."""
    setup = setup_of(group)
    state = state_per_rank(of_setup(configs, setup) if rows is None else rows, worlds)  # rows: of this setup
    frames = [rows for _, rows in group.groupby("world_size", sort=True)]
    first = group.iloc[0]  # the console's bracket: a CPU's optimizer
    on_cpu = first["profiled_on"] == "cpu" and not first.get("optimizer_given")  # its optimizer's time a CPU's
    estimated = bool(first.get("optimizer_estimated"))  # a GPU's, from its bytes: the share the pick turns on, said
    optimizer_ms = first["optimizer_share"] * first["local_step_ms"] if on_cpu or estimated else 0.0
    labelled = state.assign(strategy=strategy_labels(state)) if len(state) else state
    weighed = {"optimizer_ms": optimizer_ms, "step_ms": first["local_step_ms"], "errors": checked and checked.errors}
    made = chosen(labelled, frames, cluster.gpu_memory_gib, weighed["errors"], optimizer_ms) if len(state) else None
    words = choice_words(labelled, frames, cluster.gpu_memory_gib, **weighed, made=made) if made else ""
    gpu_steps = first["profiled_on"] != "cpu" or bool(first["local_step_given"])  # else no GPU-hours to give
    batch = int(first["step_batch"]) if gpu_steps and "step_batch" in first else None
    rows = table_rows(labelled, frames, cluster.gpu_memory_gib, **weighed, batch=batch, made=made) if made else []
    cpu = optimizer_share_caveat(first["optimizer_share"], scaled=bool(first["local_step_given"]),
                                 optimizer=str(first.get("setup_optimizer") or "sgd"))  # fmt: skip
    even = optimizer_break_even(frames[-1], optimizer_ms=optimizer_ms, step_ms=first["local_step_ms"]) if on_cpu else ""
    left_out = first.get("own_costs_left_out", "")  # FSDP's and ZeRO's own costs, a CPU's, as the console says
    failed = parity.left_out_words(labelled)  # in sight, not only in the folded words: it is never booked
    died = gone.left_out_words(labelled)  # a strategy that failed in the run: never booked either
    said = "; ".join(part for part in (failed, died, roles.shards_nothing_words(state), _misses(cluster, group, frames),
                                       cpu if on_cpu else "", even, left_out) if part)  # fmt: skip
    header = table_header(cost=batch is not None, tokens=tokens_a_step(labelled) is not None)
    if made and rows:  # the memory question answered in the first table, not only in the paragraph far below
        header, rows = with_peak_column(header, rows, made[0], cluster.gpu_memory_gib)
    if booked is not None and rows:
        booked["row"] = rows[-1]
    legend = ""
    if run and made and rows and batch:  # the whole run's hours and cost beside each booking, as predict says them
        header, rows, legend = with_run(header, rows, group, cluster, made[0], run, batch=batch,
                                        tokens=tokens_a_step(labelled))  # fmt: skip
    shown_header, shown = without_blank_columns(header, rows)  # the console's columns: none blank on every row
    answer = table(list(shown_header), [[esc(cell) for cell in row] for row in shown]) if rows else ""
    answer += f'<p class="caption">{esc(legend)}.</p>' if legend else ""
    if rows and (unborne := unborne_words(checked and checked.errors)):  # the doubt where the answer is read
        answer = f"<p class=takeaway><b>Before booking by it</b>: {esc(unborne)} (How sure, below).</p>{answer}"
    if not words:
        return ""
    # Under the table, its caveats in sight and the same choice in words folded: per GPU count in full, it ran to
    # 700 words between the table and How sure, the table said again (a team lead's reading, gpt2 on dgx-h100).
    caveats = f'<p class="takeaway"><b>Caveats</b>: {esc(said)}.</p>' if said and rows else ""
    if caveats and left_out and (chain := first.get("own_costs_scaling")):  # the caveats say "on your step" alone
        caveats += (f'<details><summary>How an own cost is put on your step</summary><p class="takeaway">'
                    f"{esc(chain)}.</p></details>")  # fmt: skip
    folded = (f'<details><summary>The choice in words, GPU count by GPU count</summary><p class="takeaway">'
              f"<b>The choice</b>: {esc(words)}.</p></details>")  # fmt: skip
    if not rows:  # no table: the words are the answer
        return f'<p class="takeaway"><b>The choice</b>: {esc(words)}{esc(f" [{said}]" if said else "")}.</p>'
    return f"{answer}{caveats}{folded}"


def with_run(
    header: tuple,
    rows: list[tuple],
    group: pd.DataFrame,
    cluster: Cluster,
    choices: list,
    run: tuple[float, float | None],
    *,
    batch: int,
    tokens: float | None,
) -> tuple[tuple, list, str]:
    """The choice table with the whole run (`run`: its samples, and a GPU-hour's price or None) at each GPU count: the
    hours, GPU-hours and cost of what the row books (perfmodel.clusters.whole_run over its bookings, as `predict
    --cluster NAME --train-samples N` prints them: a range where the step is one, ≥ where a full-size floor ranks it),
    blank where nothing fits; and what they count, with the fastest set against the cheapest, to say under it."""
    samples, price = run
    booked = of_cluster(cluster.name, cluster.gpus_per_node, [group], [{c.world_size: c for c in choices}],
                        batch=batch, tokens=tokens)  # fmt: skip
    runs = [r for b in booked if (r := whole_run.of_booking(b, samples, price)) is not None]
    by_gpus = {r.booking.gpus: r for r in runs}
    priced = price is not None
    cells = []
    for row in rows:
        r = by_gpus.get(int(row[0]))
        mark = "≥" * bool(r and r.booking.at_least)
        figures = (r.hours, r.gpu_hours, *((r.cost,) if priced else ())) if r else ()
        cells.append(tuple(mark + whole_run.span(values) for values in figures) or ("",) * (2 + priced))
    at = header.index("the pick rests on") if "the pick rests on" in header else len(header)  # the figures together
    header = (*header[:at], "run h", "run GPU-h", *(("run cost",) if priced else ()), *header[at:])
    said = [whole_run.legend(runs, samples, priced=priced)] if runs else []
    tie = any(len(c.picked) > 1 and not c.open_on for c in choices)
    said += ["a tie's run figures are its first pick's, the one it books first"] * tie
    said += ["≥: at least, a full-size floor under the step"] * any(r.booking.at_least for r in runs)
    legend = "; ".join(said)
    if premium := whole_run.premium_words(booked, runs, samples, {cluster.name: price} if priced else None):
        legend += f". {premium[0].upper()}{premium[1:]}"
    return header, [(*row[:at], *cell, *row[at:]) for row, cell in zip(rows, cells, strict=True)], legend
