"""Pure figure functions for the network pages: collective bandwidth, the communication floor,
and the step-time model against measured bucket sweeps. DataFrames in, a plotly Figure out.

Inputs are the tables `harness.results.store` reads: collectives rows (`read_collectives`), a run's
`floor.parquet` and `predictions.parquet` (written by `harness.perfmodel.predict`).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from harness.analysis import agreement, roles
from harness.results.values import strategy_labels
from reports.aggregate import labelled, world_label
from reports.figures.style import PALETTE, new_figure, styled, value_text


def size_label(nbytes: float) -> str:
    """'9.01 MiB', not '9.00879 MiB': three significant figures (whole numbers from 100 up, never '1e+03')."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{value_text(nbytes / scale)} {unit}"
    return f"{value_text(nbytes)} B"


def busbw_vs_size(collectives: pd.DataFrame, *, op: str) -> go.Figure:
    """Bus bandwidth against message size (log x), one line per world size; wrong results marked."""
    rows = collectives[collectives["op"] == op].sort_values("bytes")
    figure = new_figure()
    for i, (world, group) in enumerate(rows.groupby("world_size")):
        wrong = group[~group["correct"].astype(bool)]
        figure.add_trace(
            go.Scatter(
                name=world_label(int(world)),
                x=group["bytes"],
                y=group["busbw_gbps"],
                mode="lines+markers",
                line={"color": PALETTE[i % len(PALETTE)]},
                customdata=list(zip(group["time_us"], group["algbw_gbps"], strict=True)),
                hovertemplate="%{x:.3s}B: busbw %{y:.3f} GB/s, algbw %{customdata[1]:.3f} GB/s, "
                "%{customdata[0]:.1f} µs<extra>%{fullData.name}</extra>",
            )
        )
        if not wrong.empty:
            figure.add_trace(
                go.Scatter(
                    name=f"{world_label(int(world))}: WRONG RESULT",
                    x=wrong["bytes"],
                    y=wrong["busbw_gbps"],
                    mode="markers",
                    marker={"symbol": "x", "size": 14, "color": "#d62728"},
                )
            )
    ticks = sorted(rows["bytes"].unique())[::2]
    return styled(
        figure,
        title=f"{op}: bus bandwidth against message size (higher is better)",
        xaxis={
            "title": "message size (log)",
            "type": "log",
            "tickvals": ticks,
            "ticktext": [size_label(t) for t in ticks],
        },
        yaxis={"title": "bus bandwidth (GB/s)", "rangemode": "tozero"},
        legend_title="world size",
    )


def with_floor(configs: pd.DataFrame, floor: pd.DataFrame, *, workload: str) -> pd.DataFrame:
    """The workload's configurations that have a floor row, with it (the baseline, the floor's own compute, left
    out). A configuration without one (a strategy that does not all-reduce its whole gradient) is not there."""
    rows = labelled(configs, workload=workload).merge(floor[["config_id", "floor_ms", "allreduce_ms", "local_ms"]],
                                                      on="config_id")  # fmt: skip
    return rows[~roles.is_baseline(rows)]


def without_floor(configs: pd.DataFrame, floor: pd.DataFrame, *, workload: str) -> list[str]:
    """'stock comm_hook=powersgd · w2': the workload's communicating configurations (world size ≥ 2, not the
    baseline) that have no floor row, so step_vs_floor does not draw them (one name per strategy and world size)."""
    rows = labelled(configs, workload=workload)
    rows = rows[(rows["world_size"] > 1) & ~roles.is_baseline(rows) & ~rows["config_id"].isin(floor["config_id"])]
    names = (f"{label} · w{int(w)}" for label, w in zip(strategy_labels(rows), rows["world_size"], strict=True))
    return list(dict.fromkeys(names))


def step_vs_floor(configs: pd.DataFrame, floor: pd.DataFrame, *, workload: str, pooled: bool = False) -> go.Figure:
    """Each configuration's median step (bars) against its floor max(local step, one all-reduce of the
    bytes it sends at the measured latency and bus bandwidth) (black ticks): the gap is what better
    overlap could still win. Only configurations with a floor row are drawn (with_floor). `pooled`: the rows are
    aggregate.geometric_over_repeats's, each bar the geometric mean of its repeats (as local's in the tick), its
    whiskers the lowest and highest repeat."""
    rows = with_floor(configs, floor, workload=workload)
    x = rows["config_label"].tolist()
    whiskers = {"type": "data", "symmetric": False, "array": rows["repeat_high_ms"] - rows["step_ms_median"],
                "arrayminus": rows["step_ms_median"] - rows["repeat_low_ms"]} if pooled else None  # fmt: skip
    measured = go.Bar(
        name="measured step (geometric mean of its repeats' medians)" if pooled else "measured step", x=x,
        y=rows["step_ms_median"], marker_color=PALETTE[0], error_y=whiskers,
        hovertemplate="%{y:.2f} ms<extra>measured</extra>",
    )  # fmt: skip
    floor_marks = go.Scatter(
        name="floor: max(local step, one all-reduce of the bytes sent)",
        x=x,
        y=rows["floor_ms"],
        mode="markers",
        marker={"symbol": "line-ew-open", "size": 30, "color": "black", "line": {"width": 3}},
        customdata=list(zip(rows["local_ms"], rows["allreduce_ms"], strict=True)),
        hovertemplate="floor %{y:.2f} ms (local %{customdata[0]:.2f}, all-reduce %{customdata[1]:.2f})<extra></extra>",
    )
    figure = new_figure(measured, floor_marks)
    return styled(
        figure,
        title=f"{workload}: step time against the communication floor (closer is better)",
        xaxis_title="configuration",
        yaxis={"title": "step time (ms)", "rangemode": "tozero"},
    )


def predicted_vs_measured(predictions: pd.DataFrame, *, workload: str, world_size: int) -> go.Figure:
    """The measured bucket-cap curve (the swept strategy's: stock, predictions.parquet's `impl`; per cap the
    geometric mean of its repeats' median steps) with the model's, with and without contention, and the error
    of each."""
    rows = predictions[(predictions["workload"] == workload) & (predictions["world_size"] == world_size)]
    rows = rows.sort_values("bucket_cap_mb")
    caps = rows["bucket_cap_mb"].tolist()
    swept = " and ".join(dict.fromkeys(rows["impl"])) if "impl" in rows else roles.reference_name()
    figure = new_figure(
        go.Scatter(name=f"measured: {swept} (geometric mean of repeats' medians)", x=caps, y=rows["measured_ms"],
                   mode="lines+markers", line={"color": "black", "width": 3},
                   hovertemplate="%{x:g} MiB: %{y:.3g} ms (geometric mean of the repeats' medians)<extra></extra>"),
    )  # fmt: skip
    curves = (("predicted_raw_ms", "predicted, raw profile", PALETTE[2], "dot"),
              ("predicted_raw_contention_ms", "predicted, raw + contention", PALETTE[3], "dot"),
              ("predicted_ms", "predicted, calibrated", PALETTE[0], "dash"),
              ("predicted_contention_ms", "predicted, calibrated + contention", PALETTE[1], "dash"))  # fmt: skip
    for column, name, colour, dash in curves:
        if column in rows and rows[column].notna().all():
            error = agreement.prediction_error(caps, rows["measured_ms"], rows[column])
            best = agreement.caps_text(error["best_predicted_caps_mb"])
            figure.add_trace(
                go.Scatter(name=f"{name} (MAPE {error['mape']:.1%}, best {best})",
                           x=caps, y=rows[column], mode="lines+markers", line={"color": colour, "dash": dash})
            )  # fmt: skip
    return styled(
        figure,
        title=f"{workload} at {world_label(world_size)}: {swept}'s measured step time (black) against the model's, "
        "per bucket cap",
        xaxis={"title": "bucket_cap_mb (log)", "type": "log", "tickvals": caps, "ticktext": [f"{c:g}" for c in caps]},
        yaxis={"title": "step time (ms)", "rangemode": "tozero"},  # what each curve is, its legend entry says
        legend_title="curve",
    )
