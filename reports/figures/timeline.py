"""The bucket timeline drawn: in one ordinary step of rank 0, when the phases ran and when each
bucket was ready, launched and done — the overlap of backward and communication seen directly,
without a profiler trace."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from harness.analysis import overlap
from reports.aggregate import PHASES, labelled
from reports.figures.network import size_label
from reports.figures.steps import SEGMENT_STYLE
from reports.figures.style import new_figure, styled

PHASE_COLOURS = {"forward_ms": "#4c78a8", "backward_ms": "#f58518", "sync_ms": "#e45756", "optimizer_ms": "#72b7b2"}
BUCKET_COLOUR = "#54a24b"
MAX_BUCKET_ROWS = 24
"""Above this many collectives in a step (naive's one per parameter: 148 for gpt2), a configuration's are
drawn in one row, each at its own time: a row each made the figure thousands of pixels tall."""


def bucket_timeline(
    configs: pd.DataFrame, timeline: pd.DataFrame, *, workload: str, world_size: int
) -> go.Figure | None:
    """A Gantt chart per configuration of `workload` at `world_size` that timed its collectives: one
    row of phases, one row per bucket (its all-reduce from launch to completion; a tick where it
    became ready, when that was earlier). None when no configuration there has a timeline."""
    rows = labelled(configs, workload=workload)
    rows = rows[(rows["world_size"] == world_size) & rows["config_id"].isin(timeline.get("config_id", []))]
    if rows.empty:
        return None
    figure = new_figure()
    order: list[str] = []
    for config in rows.itertuples():
        collectives = timeline[timeline["config_id"] == config.config_id]
        phase_row = f"{config.label}: phases"
        order.append(phase_row)
        _add_phases(figure, phase_row, collectives, first=not figure.data)
        if len(collectives) > MAX_BUCKET_ROWS:
            name = f"{config.label}: all {len(collectives)} collectives ({size_label(collectives['bytes'].sum())})"
            order.append(name)
            _add_collectives_row(figure, name, collectives)
            continue
        for bucket in collectives.itertuples():
            name = f"{config.label}: {collective_name(bucket)} ({size_label(bucket.bytes)})"
            order.append(name)
            _add_bucket(figure, name, bucket)
    figure.update_yaxes(categoryorder="array", categoryarray=order, autorange="reversed")
    return styled(
        figure,
        title=f"{workload} at {world_size} ranks: one typical step of rank 0, its phases and its buckets",
        barmode="overlay",
        xaxis={"title": "ms from the step's start", "rangemode": "tozero"},
        height=max(320, 28 * len(order) + 140),
        legend_title="segment",
    )


def collective_name(collective) -> str:
    """'bucket 3' for a gradient all-reduce, 'broadcast buffers' for what a broadcast carried (its kind), else
    the collective and its index ('all-gather 2')."""
    kind = getattr(collective, "collective", "all_reduce")  # a timeline of the gradients' alone
    if kind == "all_reduce":
        return f"bucket {collective.bucket}"
    return kind.replace("_", " ") if kind.startswith("broadcast") else f"{kind.replace('_', '-')} {collective.bucket}"


def _add_phases(figure: go.Figure, row: str, collectives: pd.DataFrame, *, first: bool) -> None:
    """The step's phases back to back, each less the time when a collective was in flight and no compute ran
    (overlap.in_flight_and_exposed, the step's exposed_* figures), which is drawn apart as the stacked bars draw it:
    a bucket over a phase's own colour is hidden, one over the red is not (DDP waits for its last buckets inside
    backward, which the whole backward phase would draw as compute)."""
    step = collectives.iloc[0]
    phases = {phase: float(step[phase]) if pd.notna(step[phase]) else 0.0 for phase in PHASES}
    bounds = overlap.phase_bounds(phases)
    _, exposed = overlap.in_flight_and_exposed(phases, [_stamps(c) for c in collectives.itertuples()])
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


def _stamps(collective) -> dict:
    """A timeline row as overlap takes it: an unstamped completion as None, `blocking` where recorded."""
    done = collective.done_ms if pd.notna(collective.done_ms) else None
    blocking = getattr(collective, "blocking", False)
    return {"ready_ms": collective.ready_ms, "launched_ms": collective.launched_ms, "done_ms": done,
            "blocking": bool(blocking) if pd.notna(blocking) else False}  # fmt: skip


def _add_bucket(figure: go.Figure, row: str, bucket) -> None:
    """The all-reduce from launch to completion; one without a completion stamp is drawn, hatched, to the
    end of the sync phase, where the overlap figures count it until (harness.analysis.overlap)."""
    stamped = pd.notna(bucket.done_ms)
    done = bucket.done_ms if stamped else _sync_end(bucket)
    done_text = f"done {done:.2f} ms" if stamped else "done: not stamped (counted until the end of sync)"
    figure.add_trace(
        go.Bar(
            name="collective in flight", legendgroup="bucket", showlegend=not _named(figure, "collective in flight"),
            orientation="h", y=[row], x=[done - bucket.launched_ms], base=[bucket.launched_ms],
            marker_color=BUCKET_COLOUR, marker_pattern_shape="" if stamped else "/",
            hovertemplate=(f"ready {bucket.ready_ms:.2f} ms, launched {bucket.launched_ms:.2f} ms, "
                           f"{done_text}<extra></extra>"),
        )
    )  # fmt: skip
    if bucket.launched_ms - bucket.ready_ms > 0.01:  # waited for an earlier bucket: in-order launch
        figure.add_trace(
            go.Scatter(
                name="ready", legendgroup="ready", showlegend=not _named(figure, "ready"), x=[bucket.ready_ms],
                y=[row], mode="markers", marker={"symbol": "line-ns-open", "size": 14, "color": "#222"},
                hovertemplate=f"ready at {bucket.ready_ms:.2f} ms<extra></extra>",
            )
        )  # fmt: skip


def _add_collectives_row(figure: go.Figure, row: str, collectives: pd.DataFrame) -> None:
    """Every collective of a step in one row, each from launch to completion (one without a stamp to the end
    of sync, as _add_bucket draws it), one trace: bars that touch read as one busy stretch."""
    buckets = list(collectives.itertuples())
    spans = [(b, b.done_ms if pd.notna(b.done_ms) else _sync_end(b)) for b in buckets]
    figure.add_trace(
        go.Bar(
            name="collective in flight", legendgroup="bucket", showlegend=not _named(figure, "collective in flight"),
            orientation="h", y=[row] * len(buckets), x=[end - b.launched_ms for b, end in spans],
            base=[b.launched_ms for b in buckets], marker_color=BUCKET_COLOUR,
            customdata=[[b.bucket, size_label(b.bytes), b.ready_ms, end] for b, end in spans],
            hovertemplate=("collective %{customdata[0]} (%{customdata[1]}): ready %{customdata[2]:.2f} ms, launched "
                           "%{base:.2f} ms, done %{customdata[3]:.2f} ms<extra></extra>"),
        )
    )  # fmt: skip


def _sync_end(bucket) -> float:
    """Where the step's sync phase ends, in ms from its start (forward, backward, sync back to back)."""
    durations = (getattr(bucket, phase) for phase in ("forward_ms", "backward_ms", "sync_ms"))
    return sum(float(ms) for ms in durations if pd.notna(ms))


def _named(figure: go.Figure, name: str) -> bool:
    return any(trace.name == name for trace in figure.data)
