"""The strategies' memory: each measured peak per rank, what each rank holds after a step (parameters, gradients,
optimizer state), and each strategy's peak against its step time. Pure figure functions: tidy DataFrames in, a
plotly Figure out. No I/O, no `show()`.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reports.aggregate import labelled, world_label
from reports.figures.style import PALETTE, memory_unit, merged_labels, new_figure, styled

MEMORY_METRICS = (
    ("mem_peak_nvml_mb", "device peak (NVML)"),
    ("mem_peak_reserved_mb", "allocator reserved peak"),
    ("mem_peak_allocated_mb", "allocator allocated peak"),
    ("mem_peak_rss_mb", "process RSS peak"),
)


def memory_by_rank(
    configs: pd.DataFrame, ranks: pd.DataFrame, *, workload: str, metrics: tuple = MEMORY_METRICS
) -> go.Figure:
    """Each measured memory peak per configuration (`metrics`: (column, title)), one bar per rank (rank-0 skew)."""
    rows = labelled(configs, workload=workload)[["config_id", "config_label"]].merge(ranks, on="config_id")
    metrics = [(column, title) for column, title in metrics if rows[column].notna().any()]
    figure = make_subplots(
        figure=new_figure(),
        rows=max(len(metrics), 1),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[t for _, t in metrics],
    )
    unit, scale = memory_unit(pd.concat([rows[c] for c, _ in metrics]) if metrics else pd.Series(dtype=float))
    for row, (column, _) in enumerate(metrics, start=1):
        for rank, group in rows.groupby("rank"):
            figure.add_trace(
                go.Bar(
                    name=f"rank {rank}",
                    legendgroup=f"rank {rank}",
                    marker_color=PALETTE[int(rank) % len(PALETTE)],  # one colour per rank in every panel
                    showlegend=row == 1,
                    x=group["config_label"],
                    y=group[column] / scale,
                    hovertemplate="%{y:.3g} " + unit + "<extra>%{fullData.name}</extra>",
                ),
                row=row,
                col=1,
            )
        figure.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    return styled(
        figure,
        title=f"{workload}: memory peaks per rank",
        barmode="group",
        height=260 * max(len(metrics), 1) + 120,
        legend_title="rank",
    )


HELD_PARTS = (
    ("held_param_mb", "parameters"),
    ("held_grad_mb", "gradients"),
    ("held_optimizer_state_mb", "optimizer state"),
)


def peak_memory_column(configs: pd.DataFrame, metrics: tuple = MEMORY_METRICS) -> tuple[str, str] | None:
    """The most telling memory peak this run measured: NVML, else the allocator, else RSS."""
    for column, title in metrics[:2] + metrics[3:]:
        if column in configs and configs[column].notna().any():
            return column, title
    return None


def memory_vs_time(configs: pd.DataFrame, *, workload: str, metrics: tuple = MEMORY_METRICS) -> go.Figure:
    """Every strategy as a point at (median step time, peak memory of its largest rank), one
    trace per world size: the time–memory frontier that sharding trades along."""
    rows = labelled(configs, workload=workload)
    metric = peak_memory_column(rows, metrics)
    figure = new_figure()
    unit, scale = memory_unit(rows[metric[0]]) if metric is not None else ("MiB", 1.0)
    if metric is not None:
        column, drawn = metric[0], rows.dropna(subset=[metric[0]])
        extent = (drawn["step_ms_median"].max(), drawn[column].max() / scale)  # near points share a label
        for world, group in drawn.groupby("world_size"):
            figure.add_trace(
                go.Scatter(
                    name=world_label(int(world)),
                    x=group["step_ms_median"],
                    y=group[column] / scale,
                    mode="markers+text",
                    text=merged_labels(group["step_ms_median"], group[column] / scale, group["label"], extent=extent),
                    customdata=group["label"],
                    textposition="middle right",
                    cliponaxis=False,
                    marker={"size": 9},
                    hovertemplate="%{customdata}: %{x:.2f} ms, %{y:.3g} " + unit + "<extra>%{fullData.name}</extra>",
                )
            )
    label = metric[1] if metric else "no memory measured"
    # Both axes from zero: a 1 ms or 1 % difference must look like one, not like a corner-to-corner trade-off.
    return styled(
        figure,
        title=f"{workload}: memory against time ({label}, largest rank)",
        xaxis={"title": "median step time (ms)", "rangemode": "tozero"},
        yaxis={"title": unit, "rangemode": "tozero"},
        legend_title="world size",
    )


def held_by_rank(configs: pd.DataFrame, ranks: pd.DataFrame, *, workload: str) -> go.Figure:
    """What each rank holds after its last step, stacked: parameters, gradients, optimizer state.
    Sharded strategies (zero, fsdp) hold 1/N of some of them; replicated ones hold it all."""
    rows = labelled(configs, workload=workload)[["config_id", "config_label"]].merge(ranks, on="config_id")
    rows = rows.dropna(subset=["held_param_mb"]) if "held_param_mb" in rows else rows.iloc[0:0]
    x = [rows["config_label"], "rank " + rows["rank"].astype(str)]
    present = [(column, title) for column, title in HELD_PARTS if column in rows]
    unit, scale = memory_unit(sum(rows[c].fillna(0) for c, _ in present) if present else pd.Series(dtype=float))
    traces = [
        go.Bar(name=title, x=x, y=rows[column] / scale, hovertemplate=f"%{{y:.3g}} {unit}<extra>{title}</extra>")
        for column, title in present
    ]
    return styled(
        new_figure(*traces), title=f"{workload}: what each rank holds after a step", barmode="stack", yaxis_title=unit
    )
