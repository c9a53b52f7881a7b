"""Figures of steps and phases: where a step's time goes, and whether its numbers can be trusted
(distribution, drift over steps, noise). Style and colours come from `reports.figures`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from harness.analysis import roles, stats
from reports.aggregate import labelled, world_label
from reports.figures.style import DASHES, new_figure, strategy_colours, styled
from reports.step_series import SEGMENTS

SEGMENT_STYLE = {  # column: (legend name, colour)
    "forward_ms": ("forward", "#4c78a8"),
    "backward_ms": ("backward", "#f58518"),
    "exposed_comm_ms": ("communication not hidden", "#d62728"),
    "sync_ms": ("sync (rest)", "#ff9da6"),
    "optimizer_ms": ("optimizer", "#72b7b2"),
}


def time_breakdown(configs: pd.DataFrame, phases: pd.DataFrame, *, workload: str) -> go.Figure:
    """Stacked mean forward / backward / communication not hidden / sync / optimizer time of each
    configuration's slowest rank (step_series.phase_means: they add up to its mean step; the exposed
    communication taken out of its phase)."""
    rows = labelled(configs, workload=workload).merge(phases, on="config_id", suffixes=("_config", ""))
    # a strategy that communicates with its collectives untimed (stock without --bucket-timeline): its communication
    # is inside backward or sync, and the bar's name says so (a walkthrough read its backward as compute alone)
    untimed = rows["exposed_comm_ms"].isna() & (rows["world_size"] > 1) & ~roles.flag(rows, "baseline")
    named = rows["config_label"].astype(str)  # (a float column where no row is left)
    # which rank the bar draws: a straggler's bar and its waiting peer's differ in kind, at nearly one step time
    drawn = rows["rank"].astype(object).map(lambda rank: f" · rank {int(rank)}" if pd.notna(rank) else "")
    named = named.where(rows["world_size"] <= 1, named + drawn)
    labels = named.where(~untimed, named + " (comm. not timed)")
    figure = new_figure()
    for segment in SEGMENTS:
        name, colour = SEGMENT_STYLE[segment]
        measured = rows[segment].notna()
        figure.add_trace(
            go.Bar(
                name=name,
                x=labels,
                y=rows[segment].fillna(0.0),  # a null breaks plotly's stack: the segments above it drop to 0
                customdata=np.where(measured, "", ": not timed, inside backward or sync"),
                marker_color=colour,
                hovertemplate="%{y:.2f} ms (mean per step, slowest rank)%{customdata}<extra>%{fullData.name}</extra>",
            )
        )
    return styled(
        figure,
        title=f"{workload}: where the time goes (mean step of the slowest rank, by segment)",
        barmode="stack",
        yaxis={"title": "ms", "rangemode": "tozero"},
        legend_title="segment",
    )


def exposed_communication(configs: pd.DataFrame, *, workload: str) -> go.Figure | None:
    """Measured communication per strategy and world size: in flight (hollow) and not hidden by
    compute (filled), and the share hidden (overlap efficiency). None when nothing was measured."""
    rows = labelled(configs, workload=workload)
    rows = rows[~roles.is_baseline(rows) & (rows.get("comm_ms", pd.Series(dtype=float)).fillna(0) > 0)]
    if rows.empty:
        return None
    figure = make_subplots(
        figure=new_figure(),
        rows=1,
        cols=2,
        subplot_titles=("mean per step (ms): in flight / not hidden", "overlap efficiency (1.0 = all hidden)"),
    )
    colours = strategy_colours(labelled(configs, workload=workload))
    for label, group in rows.groupby("label", sort=False):
        x = [world_label(n) for n in group["world_size"]]
        colour = colours[label]
        common = {"name": label, "legendgroup": label, "marker_color": colour, "offsetgroup": label}
        outline = {**common, "marker_color": "rgba(0,0,0,0)", "marker_line_color": colour, "marker_line_width": 1.5}
        in_flight = "in flight %{y:.2f} ms (mean per step)<extra>%{fullData.name}</extra>"
        figure.add_trace(go.Bar(x=x, y=group["comm_ms"], showlegend=False, hovertemplate=in_flight, **outline), 1, 1)
        not_hidden = "not hidden %{y:.2f} ms (mean per step)<extra>%{fullData.name}</extra>"
        figure.add_trace(go.Bar(x=x, y=group["exposed_comm_ms"], hovertemplate=not_hidden, **common), row=1, col=1)
        # Each share written on its bar: a strategy that hides none draws a bar of no height, and a panel of them
        # read as empty, no figure at all (gpt2's bucketed and fsdp, 0% each on the CPU).
        share = group["overlap_efficiency"]
        said = ["" if pd.isna(v) else f"{v:.0%}" for v in share]
        figure.add_trace(
            go.Bar(
                x=x,
                y=share,
                showlegend=False,
                text=said,
                textposition="outside",
                cliponaxis=False,
                hovertemplate="%{y:.0%} hidden<extra>%{fullData.name}</extra>",
                **common,
            ),
            1,
            2,
        )
    figure.add_hline(y=1.0, line_dash="dash", line_color="#888", row=1, col=2)
    figure.update_yaxes(rangemode="tozero", row=1, col=1)
    figure.update_yaxes(range=[0, 1.05], row=1, col=2)
    return styled(
        figure, title=f"{workload}: measured communication, and how much of it compute hid", barmode="overlay"
    )


def step_time_distribution(configs: pd.DataFrame, boxes: pd.DataFrame, *, workload: str) -> go.Figure:
    """A box per configuration over measured slowest-rank step times (quartiles; whiskers min–max)."""
    rows = labelled(configs, workload=workload).merge(boxes, on="config_id")
    figure = new_figure(
        go.Box(
            name="step time",
            x=rows["config_label"],
            q1=rows["q1"],
            median=rows["median"],
            q3=rows["q3"],
            lowerfence=rows["min"],
            upperfence=rows["max"],
            marker_color="#4c78a8",
        )
    )
    return styled(
        figure,
        title=f"{workload}: step-time distribution per configuration",
        yaxis={"title": "step time (ms)", "rangemode": "tozero"},
    )


def step_time_series(configs: pd.DataFrame, series: pd.DataFrame, *, workload: str) -> go.Figure:
    """Slowest-rank step time against step, one line per configuration, warm-up steps as crosses."""
    rows = labelled(configs, workload=workload)
    colours = strategy_colours(rows)
    dashes = {world: DASHES[i % len(DASHES)] for i, world in enumerate(sorted(set(rows["world_size"])))}
    # Plain numpy arrays, split once: slicing pandas' Arrow-backed frames per configuration was the slow part.
    ids = series["config_id"].to_numpy(dtype=object)
    steps, times, warm = (series[c].to_numpy() for c in ("step", "step_ms", "warmup"))
    positions = pd.Series(np.arange(len(ids))).groupby(ids, sort=False).indices if len(ids) else {}
    figure = new_figure()
    for config in rows.itertuples():
        at = positions.get(config.config_id, np.array([], dtype=int))
        measured, warmup = at[~warm[at].astype(bool)], at[warm[at].astype(bool)]
        line = {"color": colours[config.label], "dash": dashes[config.world_size], "width": 1.5}
        figure.add_trace(
            go.Scatter(
                name=config.config_label,
                legendgroup=config.config_label,
                x=steps[measured],
                y=times[measured],
                mode="lines",
                line=line,
            )
        )
        if len(warmup):
            figure.add_trace(
                go.Scatter(
                    name=f"{config.config_label} (warm-up)",
                    legendgroup=config.config_label,
                    showlegend=False,
                    x=steps[warmup],
                    y=times[warmup],
                    mode="markers",  # hollow, in the line's own colour: warm-up reads as part of its series
                    marker={"symbol": "circle-open", "size": 6, "color": colours[config.label]},
                )
            )
    return styled(
        figure,
        title=f"{workload}: step time per step (hollow circles: warm-up, not counted)",
        xaxis_title="step",
        yaxis={"title": "step time (ms)", "rangemode": "tozero"},
    )


def noise(configs: pd.DataFrame, *, workload: str, threshold: float = stats.NOISY_CV) -> go.Figure:
    """Coefficient of variation of step time per configuration; those above `threshold` in red."""
    rows = labelled(configs, workload=workload).dropna(subset=["step_ms_cv"])
    noisy = rows["step_ms_cv"] > threshold
    figure = new_figure()
    for name, part, colour in (
        (f"cv ≤ {threshold:g}", rows[~noisy], "#54a24b"),
        (f"cv > {threshold:g} (noisy)", rows[noisy], "#d62728"),
    ):
        figure.add_trace(go.Bar(name=name, x=part["config_label"], y=part["step_ms_cv"], marker_color=colour))
    figure.add_hline(y=threshold, line_dash="dash", line_color="#d62728")
    return styled(
        figure,
        title=f"{workload}: noise (coefficient of variation of step time)",
        yaxis_title="std / mean",
        barmode="overlay",
        xaxis={"categoryorder": "array", "categoryarray": list(rows["config_label"])},
    )
