"""The bucket timeline drawn: in one ordinary step (rank 0's median), when each rank's phases ran and when each
bucket was ready, launched and done — the overlap of backward and communication, and one rank's collectives waiting
for another's, seen directly, without a profiler trace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from harness.analysis import overlap
from harness.results.dictionary.columns import PHASE_COLUMNS as PHASES
from reports.aggregate import labelled
from reports.figures.network import size_label
from reports.figures.steps import SEGMENT_STYLE
from reports.figures.style import new_figure, styled

PHASE_COLOURS = {"forward_ms": "#4c78a8", "backward_ms": "#f58518", "sync_ms": "#e45756", "optimizer_ms": "#72b7b2"}
BUCKET_COLOUR = "#54a24b"
RANK_COLOURS = (BUCKET_COLOUR, "#b279a2", "#9d755d", "#eeca3b")
"""A bucket row's lanes, rank 0's first: none a phase's colour, so a lane never reads as compute."""
WAITED = "ready, waiting to launch"
MAX_BUCKET_ROWS = 24
"""Above this many collectives in a step (naive's one per parameter: 148 for gpt2), a configuration's are
drawn in one row, each at its own time: a row each made the figure thousands of pixels tall."""


Holds = Callable[[str, Any], tuple[str, str]]
"""What a bucket holds, from (config_id, its timeline row): a short label for its row and a line for its hover, ''
where not known."""

MAX_RANKS_DRAWN = 4
"""Up to this many ranks, every rank is drawn; above it, rank 0 and the rank whose collectives were longest in
flight (the one that waited most for the others)."""


def bucket_timeline(
    configs: pd.DataFrame, timeline: pd.DataFrame, *, workload: str, world_size: int, holds: Holds | None = None
) -> go.Figure | None:
    """A Gantt chart per configuration of `workload` at `world_size` that timed its collectives, in rank 0's typical
    step: a row of phases for each rank drawn (drawn_ranks), then one row per bucket, holding each drawn rank's
    collective from launch to completion in a lane of its own (rank 0's on top) and, before it, the wait from ready
    to launch where there was one; each rank on its own step's clock: a collective in flight far longer on one rank
    than on rank 0 waited there for another rank's launch; `holds`: what a bucket holds, where known (its row's
    label names it, its hover lists it). None when no configuration there has a timeline."""
    rows = labelled(configs, workload=workload)
    rows = rows[(rows["world_size"] == world_size) & rows["config_id"].isin(timeline.get("config_id", []))]
    if rows.empty:
        return None
    figure = new_figure()
    order: list[str] = []
    others: set[str] = set()  # how the ranks drawn were chosen: every rank, or rank 0 and the longest in flight
    lanes_drawn = 1
    for config in rows.itertuples():
        timed = timeline[timeline["config_id"] == config.config_id]
        ranks = drawn_ranks(timed)
        every = len(ranks) == timed["rank"].nunique() if "rank" in timed else True
        others |= {"each rank's" if every else "rank 0's and the longest in flight's"} if len(ranks) > 1 else set()
        lanes_drawn = max(lanes_drawn, len(ranks))
        by_rank = {rank: timed[timed["rank"] == rank] if "rank" in timed else timed for rank in ranks}
        who = {rank: "" if rank == 0 else f"rank {rank}{'' if every else ', longest in flight'}: " for rank in ranks}
        for rank in ranks:
            phase_row = f"{config.label}: {who[rank]}phases"
            order.append(phase_row)
            _add_phases(figure, phase_row, by_rank[rank], first=not figure.data)
        if max(len(collectives) for collectives in by_rank.values()) > MAX_BUCKET_ROWS:
            for rank, collectives in by_rank.items():
                size = size_label(collectives["bytes"].sum())
                name = f"{config.label}: {who[rank]}all {len(collectives)} collectives ({size})"
                order.append(name)
                _add_collectives_row(figure, name, collectives)
            continue
        drawn = _bucket_rows(config, by_rank, holds, order)
        for lane, rank in enumerate(ranks):
            _add_buckets(figure, drawn[rank], rank=rank if len(ranks) > 1 else None, lane=(lane, len(ranks)))
    figure.update_yaxes(categoryorder="array", categoryarray=order, autorange="reversed")
    # two lines: one would run past a page's width and be cut
    whose = " or ".join(sorted(others)) or "rank 0's"
    lanes = ", a lane per rank in each bucket's row (each rank on its own step's clock)" if others else ""
    return styled(
        figure,
        title=f"{workload} at {world_size} ranks, one typical step (rank 0's median):<br>{whose} phases, then its "
        f"buckets{lanes}",
        barmode="overlay",
        xaxis={"title": "ms from the step's start" + (" (each rank's own)" if others else ""), "rangemode": "tozero"},
        height=max(320, row_height(lanes_drawn) * len(order) + 140),
        legend_title="segment",
    )


def row_height(lanes: int) -> int:
    """Pixels a row: 28 for one bar, taller where a bucket's row holds a lane per rank, so that each lane's bar
    stays about 10 pixels thick."""
    return max(28, 12 * lanes + 8)


def _bucket_rows(config, by_rank: dict[int, pd.DataFrame], holds: Holds | None, order: list[str]) -> dict[int, list]:
    """Each drawn rank's collectives as (its row, its timeline row, what its hover says it holds), each row's name
    appended to `order`. The tensors are named in the row's first lane alone, the others pointing to it: every rank
    holds the same (bucket_contents shows them only then), and a copy a lane repeated them for every rank."""
    drawn: dict[int, list] = {rank: [] for rank in by_rank}
    for key, size in _collective_rows(by_rank):
        label, hover = holds(config.config_id, key) if holds else ("", "")
        name = f"{config.label}: {collective_name(key)} ({size_label(size)}{': ' * bool(label)}{label})"
        order.append(name)
        named_by = None  # the rank whose lane names the tensors
        for rank, collectives in by_rank.items():
            for bucket in collectives[_same_collective(collectives, key)].itertuples():
                said = hover if named_by is None else f"the tensors rank {named_by}'s lane names"
                named_by = rank if named_by is None else named_by
                drawn[rank].append((name, bucket, said if hover else ""))
    return drawn


def _collective_rows(by_rank: dict[int, pd.DataFrame]) -> list[tuple[Any, float]]:
    """The collectives to draw a row each, as (the first rank's row standing for it, its bytes): rank 0's in its
    launch order, then any another rank alone launched; a collective is its kind and bucket index, which every
    rank numbers alike (the strategy's bucket order)."""
    seen: dict[tuple[str, int], tuple[Any, float]] = {}
    for collectives in by_rank.values():
        for collective in collectives.itertuples():
            key = (getattr(collective, "collective", "all_reduce"), int(collective.bucket))
            seen.setdefault(key, (collective, float(collective.bytes)))
    return list(seen.values())


def _same_collective(collectives: pd.DataFrame, key) -> pd.Series:
    """Which of a rank's rows are the collective `key` (a row of another rank's, or its own)."""
    kind = getattr(key, "collective", "all_reduce")
    same = collectives["bucket"] == key.bucket
    return same & (collectives["collective"] == kind) if "collective" in collectives else same


def drawn_ranks(timed: pd.DataFrame) -> list[int]:
    """The ranks a configuration's step is drawn for: every rank up to MAX_RANKS_DRAWN, else rank 0 and the rank
    whose collectives were in flight longest (launch to completion, summed: the one that waited most for another's
    launch); [0] for a timeline of rank 0 alone."""
    if "rank" not in timed:
        return [0]
    ranks = sorted(int(r) for r in timed["rank"].unique())
    if len(ranks) <= MAX_RANKS_DRAWN:
        return ranks
    flight = (timed["done_ms"] - timed["launched_ms"]).groupby(timed["rank"]).sum().drop(0, errors="ignore")
    return [0, int(flight.idxmax())]


def collective_name(collective) -> str:
    """'bucket 3' for a gradient all-reduce, 'broadcast buffers' for what a broadcast carried and 'unused mask'
    for bucketed's mask of used parameters (its kind: no bucket's), else the collective and its index
    ('all-gather 2')."""
    kind = getattr(collective, "collective", "all_reduce")  # a timeline of the gradients' alone
    if kind == "all_reduce":
        return f"bucket {collective.bucket}"
    whole = kind.startswith("broadcast") or kind == "unused_mask"
    return kind.replace("_", " ") if whole else f"{kind.replace('_', '-')} {collective.bucket}"


def _add_phases(figure: go.Figure, row: str, collectives: pd.DataFrame, *, first: bool) -> None:
    """The step's phases back to back, each less the time when a collective was in flight and no compute ran
    (overlap.in_flight_and_exposed, the step's exposed_* figures), which is drawn apart as the stacked bars draw it:
    a bucket over a phase's own colour is hidden, one over the red is not (DDP waits for its last buckets inside
    backward, which the whole backward phase would draw as compute)."""
    step = collectives.iloc[0]
    phases = {phase: float(step[phase]) if pd.notna(step[phase]) else 0.0 for phase in PHASES}
    bounds = overlap.phase_bounds(phases)
    _, exposed = overlap.in_flight_and_exposed(phases, [stamps(c) for c in collectives.itertuples()])
    for phase in PHASES:
        name = phase.removesuffix("_ms")
        own = overlap.minus([bounds[name]], exposed) or [(bounds[name][0], bounds[name][0])]
        _add_spans(figure, row, own, name=name, group=phase, colour=PHASE_COLOURS[phase], legend=first)
    if exposed:
        label, colour = SEGMENT_STYLE["exposed_comm_ms"]
        _add_spans(figure, row, exposed, name=label, group="exposed", colour=colour, legend=not _named(figure, label))


def _add_spans(figure: go.Figure, row: str, spans: list, *, name: str, group: str, colour: str, legend: bool) -> None:
    figure.add_trace(
        go.Bar(
            name=name, legendgroup=group, showlegend=legend, orientation="h", y=[row] * len(spans),
            x=[end - start for start, end in spans], base=[start for start, _ in spans], marker_color=colour,
            customdata=[end for _, end in spans],
            hovertemplate=f"{name}: %{{base:.2f}}–%{{customdata:.2f}} ms<extra></extra>",
        )
    )  # fmt: skip


def stamps(collective) -> dict:
    """A timeline row as overlap takes it: an unstamped completion as None, `blocking` where recorded."""
    done = collective.done_ms if pd.notna(collective.done_ms) else None
    blocking = getattr(collective, "blocking", False)
    return {"ready_ms": collective.ready_ms, "launched_ms": collective.launched_ms, "done_ms": done,
            "blocking": bool(blocking) if pd.notna(blocking) else False}  # fmt: skip


def _add_buckets(figure: go.Figure, buckets: list, *, rank: int | None = None, lane=(0, 1)) -> None:
    """One rank's collectives, each (its row, its timeline row, what it holds) from launch to completion, in
    `lane` (its index, of how many) of the bucket's row, named and coloured by `rank` where several ranks share the
    row; one without a completion stamp is drawn, hatched, to the end of the sync phase, where the overlap figures
    count it until (harness.analysis.overlap). Where one waited for an earlier bucket's launch (buckets launch in
    order), a grey bar before it spans that wait. A trace a rank, each bar's figures in its customdata under one
    hovertemplate: a trace and a template a bar repeated them for every bucket and rank (gpt2/small, caps 1 and 5,
    3 ranks: its run page 202 KB, 152 KB so)."""
    if not buckets:
        return
    whose = "" if rank is None else f"rank {rank}: "
    name, place = f"{whose}collective in flight", _lane_place(*lane)
    spans = [(row, b, held, b.done_ms if pd.notna(b.done_ms) else _sync_end(b)) for row, b, held in buckets]
    figure.add_trace(
        go.Bar(
            name=name, legendgroup=name, showlegend=not _named(figure, name), orientation="h",
            y=[row for row, *_ in spans], x=[end - b.launched_ms for _, b, _, end in spans],
            base=[b.launched_ms for _, b, _, _ in spans], **place,
            marker_color=RANK_COLOURS[lane[0] % len(RANK_COLOURS)] if rank is not None else BUCKET_COLOUR,
            marker_pattern_shape=["" if pd.notna(b.done_ms) else "/" for _, b, _, _ in spans],
            customdata=[[collective_name(b), size_label(b.bytes), b.ready_ms, _done_text(b, end),
                         f"<br>holds {held}" if held else "", end - b.launched_ms] for _, b, held, end in spans],
            # in flight from customdata: a based bar's %{x} is where it ends, not its length
            hovertemplate=(f"{whose}%{{customdata[0]}} (%{{customdata[1]}}): ready %{{customdata[2]:.2f}} ms, "
                           "launched %{base:.2f} ms, %{customdata[3]}, in flight %{customdata[5]:.2f} ms"
                           "%{customdata[4]}<extra></extra>"),
        )
    )  # fmt: skip
    waited = [(row, b) for row, b, _ in buckets if b.launched_ms - b.ready_ms > 0.01]  # in-order launch
    if waited:
        figure.add_trace(
            go.Bar(
                name=WAITED, legendgroup="ready", showlegend=not _named(figure, WAITED), orientation="h",
                y=[row for row, _ in waited], x=[b.launched_ms - b.ready_ms for _, b in waited],
                base=[b.ready_ms for _, b in waited], **place, marker_color="#bbbbbb",
                customdata=[[collective_name(b), b.launched_ms] for _, b in waited],
                hovertemplate=(f"{whose}%{{customdata[0]}} ready at %{{base:.2f}} ms, launched "
                               "%{customdata[1]:.2f} ms<extra></extra>"),
            )
        )  # fmt: skip


def _done_text(bucket, done: float) -> str:
    return f"done {done:.2f} ms" if pd.notna(bucket.done_ms) else "done: not stamped (counted until the end of sync)"


def _lane_place(index: int, lanes: int) -> dict:
    """Where lane `index` of `lanes` lies within its row (plotly's bar offset and width, in rows): the row's
    0.8 split evenly, lane 0 on top (the axis is reversed: lower values draw higher); nothing for a row of one
    lane."""
    if lanes <= 1:
        return {}
    width = 0.8 / lanes
    return {"offset": -0.4 + index * width, "width": width}


def _add_collectives_row(figure: go.Figure, row: str, collectives: pd.DataFrame) -> None:
    """Every collective of a step in one row, each from launch to completion (one without a stamp to the end
    of sync, as _add_buckets draws it), one trace: bars that touch read as one busy stretch."""
    buckets = list(collectives.itertuples())
    spans = [(b, b.done_ms if pd.notna(b.done_ms) else _sync_end(b)) for b in buckets]
    figure.add_trace(
        go.Bar(
            name="collective in flight", legendgroup="bucket", showlegend=not _named(figure, "collective in flight"),
            orientation="h", y=[row] * len(buckets), x=[end - b.launched_ms for b, end in spans],
            base=[b.launched_ms for b in buckets], marker_color=BUCKET_COLOUR,
            customdata=[[collective_name(b), size_label(b.bytes), b.ready_ms, end, end - b.launched_ms]
                        for b, end in spans],
            hovertemplate=("%{customdata[0]} (%{customdata[1]}): ready %{customdata[2]:.2f} ms, launched "
                           "%{base:.2f} ms, done %{customdata[3]:.2f} ms, in flight %{customdata[4]:.2f} ms"
                           "<extra></extra>"),  # not %{x}: a based bar's is where it ends
        )
    )  # fmt: skip


def _sync_end(bucket) -> float:
    """Where the step's sync phase ends, in ms from its start (forward, backward, sync back to back)."""
    durations = (getattr(bucket, phase) for phase in ("forward_ms", "backward_ms", "sync_ms"))
    return sum(float(ms) for ms in durations if pd.notna(ms))


def _named(figure: go.Figure, name: str) -> bool:
    return any(trace.name == name for trace in figure.data)
