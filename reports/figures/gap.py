"""How each configuration differs from `local` (why each is slower, where every one is): its gap over the baseline
as stacked measured parts (harness.analysis.gap), next to the phase breakdown. Parts below zero (compute faster than the
baseline's) stack downwards, so the bars' net height is the gap."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from harness.analysis import why
from reports.aggregate import labelled
from reports.figures.style import new_figure, styled

PARTS = (
    ("gap_exposed_comm_ms", "exposed communication", "#e45756"),
    ("gap_waiting_ms", "waiting for the slowest rank", "#f58518"),
    ("gap_slower_compute_ms", "slower compute", "#4c78a8"),
    ("gap_rest_ms", "the strategy's own work", "#b279a2"),
    ("gap_residual_ms", "residual (the baseline's own non-compute time)", "#bab0ac"),
)


def gap_breakdown(configs: pd.DataFrame, *, workload: str) -> go.Figure | None:
    """One bar per configuration with a measured gap (world size ≥ 2, collectives timed), stacked by part;
    a black tick marks the gap itself. None when no configuration has one."""
    rows = labelled(configs, workload=workload)
    if "gap_ms" not in rows:
        return None
    rows = rows.dropna(subset=["gap_ms"])
    if rows.empty:
        return None
    figure = new_figure()
    for column, name, colour in PARTS:
        figure.add_trace(go.Bar(name=name, x=rows["config_label"], y=rows[column], marker_color=colour,
                                hovertemplate="%{y:.2f} ms a step<extra>%{fullData.name}</extra>"))  # fmt: skip
    figure.add_trace(go.Scatter(name="the gap: step − local's", x=rows["config_label"], y=rows["gap_ms"],
                                mode="markers", marker={"symbol": "line-ew-open", "size": 28, "color": "black"},
                                hovertemplate="gap %{y:.2f} ms a step<extra></extra>"))  # fmt: skip
    figure.add_hline(y=0, line_color="#888")
    title = f"{workload}: {why.heading(rows)} (its gap, taken apart)"
    axis = {"title": "ms a step (mean, slowest rank)"}
    return styled(figure, title=title, barmode="relative", yaxis=axis, legend_title="part")
