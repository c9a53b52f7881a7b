"""Pure figure functions for the what-if page: a run's profile on a cluster it did not run on.
The rows are `reports.pages.whatif.page.predicted_rows` (one per setup, GPU count and cap), or what its collectives cost
(`reports.pages.whatif.memory.communicated`)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from reports.figures.style import DASHES, PALETTE, new_figure, styled


def _gpu_axis(rows: pd.DataFrame, marked=()) -> dict:
    """The GPU counts, each a tick; those `marked` (the counts `predict --nodes` asked for) in bold."""
    ticks = sorted(rows["world_size"].unique())
    text = [f"<b>{t}</b>" if t in marked else str(t) for t in ticks]
    return {"title": "GPUs (log; bold: asked)" if marked else "GPUs (log)", "type": "log", "tickvals": ticks,
            "ticktext": text}  # fmt: skip


def step_vs_gpus(rows: pd.DataFrame, *, cluster: str, profiled: str = "", marked=()) -> go.Figure:
    """Predicted step time against GPUs, one line per bucket cap (lower is better). `profiled`: whose gradients the
    rows bucket where they are not the model to train's ("the tiny size's"), said in the title: a tiny profile's
    flat lines, titled as the cluster's step per cap, read as the cap not mattering for the model to train."""
    figure = new_figure()
    for i, (cap, group) in enumerate(rows.groupby("bucket_cap_mb")):
        group = group.sort_values("world_size")
        figure.add_trace(go.Scatter(
            name=f"{cap:g} MiB", x=group["world_size"], y=group["step_ms"], mode="lines+markers",
            line={"color": PALETTE[i % len(PALETTE)], "dash": DASHES[i % len(DASHES)]},
            customdata=list(zip(group["nodes"], group["exposed_comm_ms"], strict=True)),
            hovertemplate="%{x} GPUs (%{customdata[0]} nodes): %{y:.3f} ms, exposed communication "
            "%{customdata[1]:.3f} ms<extra>cap %{fullData.name}</extra>",
        ))  # fmt: skip
    # From zero: a 0.3 % rise over 1,024 GPUs drawn on a 46.78–46.92 ms axis looked like a wall.
    title = f"Predicted step time on {cluster}, per bucket cap (lower is better)"
    if profiled:  # shorter, so that the title clears the figure's toolbar
        title = f"Predicted step on {cluster} per bucket cap, {profiled} gradients (not the model to train's)"
    return styled(figure, title=title,
                  xaxis=_gpu_axis(rows, marked),
                  yaxis={"title": "step ms (predicted)", "rangemode": "tozero"})  # fmt: skip


def efficiency_vs_gpus(best: pd.DataFrame, *, cluster: str, marked=()) -> go.Figure:
    """Scaling efficiency of the cap the answer names at each GPU count (1 = no cost of communication), labelled
    with that cap, or "tied" where it is one of several within the tie tolerance. Where the profile is a smaller
    size's, the model to train's at most leads (solid, first) and the profile's own is drawn dotted behind it: drawn
    the other way round, the tiny model's flat 1.0 to 1,024 GPUs read as the answer."""
    best = best.sort_values("world_size")
    labels = ["tied" if len(tied) > 1 and cap in tied else f"{cap:g} MiB"
              for cap, tied in zip(best["bucket_cap_mb"], best["tied"], strict=True)]  # fmt: skip
    smaller = "full_size_efficiency_at_most" in best  # the profile is a smaller size's: the floors allow at most
    figure = new_figure()
    if smaller:
        figure.add_trace(go.Scatter(name="at most, with the gradients of the model to train", x=best["world_size"],
                                    y=best["full_size_efficiency_at_most"], mode="lines+markers",
                                    line={"color": PALETTE[0]},
                                    hovertemplate="%{x} GPUs: at most %{y:.3f} at the cap DDP is ranked at"
                                                  "<extra></extra>"))  # fmt: skip
    figure.add_trace(go.Scatter(
        name="the size profiled, not the model to train" if smaller else "the cap named", x=best["world_size"],
        y=best["scaling_efficiency"], mode="lines+markers+text", text=labels, textposition="top center",
        line={"color": PALETTE[1], "dash": "dot"} if smaller else {"color": PALETTE[0]},
        hovertemplate="%{x} GPUs: efficiency %{y:.3f} with %{text}<extra></extra>",
    ))  # fmt: skip
    title = f"Predicted scaling efficiency on {cluster} with the cap named (labelled)"
    if smaller:
        title = (f"Predicted scaling efficiency on {cluster}: at most, with the model to train's gradients; dotted, "
                 "the size profiled, with the cap named (labelled)")  # fmt: skip
    return styled(figure, title=title,
                  xaxis=_gpu_axis(best, marked), yaxis={"title": "scaling efficiency", "range": [0, 1.05]})  # fmt: skip


STRATEGY_LINES = (("DDP", "step_ms", "full_size_step_floor_ms"),
                  ("ZeRO-1", "zero_step_ms", "zero_full_size_step_floor_ms"),
                  ("FSDP2", "fsdp_step_ms", "fsdp_full_size_step_floor_ms"))  # fmt: skip
"""Each modelled strategy's predicted step and its full-size floor, as the what-if page's best rows hold them."""


def strategies_vs_gpus(best: pd.DataFrame, *, cluster: str, marked=()) -> go.Figure | None:
    """Each modelled strategy's predicted step against GPUs at the cap DDP's answer names (solid), and where the
    profile is a smaller size's, the floor the full size's parameters put under it (dotted): the steps the choice
    ranks, by the higher of the two (ZeRO-1 by its floor). None where only DDP's step is known."""
    best = best.sort_values("world_size")
    lines = [(name, step, floor) for name, step, floor in STRATEGY_LINES if step in best and best[step].notna().any()]
    if len(lines) < 2:
        return None
    figure = new_figure()
    for i, (name, step, floor) in enumerate(lines):
        colour = PALETTE[i % len(PALETTE)]
        figure.add_trace(go.Scatter(name=f"{name}, predicted", x=best["world_size"], y=best[step],
                                    mode="lines+markers", line={"color": colour},
                                    hovertemplate="%{x} GPUs: %{y:.4g} ms<extra>%{fullData.name}</extra>"))  # fmt: skip
        if floor in best and best[floor].notna().any():
            figure.add_trace(go.Scatter(name=f"{name}, full-size floor", x=best["world_size"], y=best[floor],
                                        mode="lines", line={"color": colour, "dash": "dot"},
                                        hovertemplate="%{x} GPUs: at least %{y:.4g} ms<extra>%{fullData.name}"
                                        "</extra>"))  # fmt: skip
    return styled(figure, title=f"Predicted step per strategy on {cluster} (lower is better)",
                  xaxis=_gpu_axis(best, marked),
                  yaxis={"title": "step ms (predicted)", "rangemode": "tozero"})  # fmt: skip


def communication_vs_gpus(comm: pd.DataFrame, *, cluster: str, marked=()) -> go.Figure:
    """What each strategy's collectives take a step against GPUs (whatif_memory.communicated): DDP's all-reduces, a
    line per cap, ZeRO-1's broadcasts, FSDP2's gathers and reduce-scatters together; no step (lower is better)."""
    figure, comm = new_figure(), comm.sort_values("world_size")
    lines = [(f"DDP's all-reduces at {cap:g} MiB", group, group["DDP"]) for cap, group in comm.groupby("bucket_cap_mb")]
    once = comm.drop_duplicates("world_size")
    lines += [
        ("ZeRO-1's broadcasts", once, once["ZeRO-1"]),
        ("FSDP2's gathers and reduce-scatters", once, once["FSDP2 gathers"] + once["FSDP2 reduce-scatters"]),
    ]
    for i, (name, rows, ms) in enumerate(line for line in lines if line[2].notna().any()):
        figure.add_trace(go.Scatter(name=name, x=rows["world_size"], y=ms, mode="lines+markers",
                                    line={"color": PALETTE[i % len(PALETTE)], "dash": DASHES[i % len(DASHES)]},
                                    hovertemplate="%{x} GPUs: %{y:.4g} ms<extra>%{fullData.name}</extra>"))  # fmt: skip
    return styled(figure, title=f"Each strategy's collectives a step on {cluster}, whatever computes it (not a step)",
                  xaxis=_gpu_axis(comm, marked), yaxis={"title": "ms a step (log)", "type": "log"})  # fmt: skip
