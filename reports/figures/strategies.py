"""The strategies side by side: step time, throughput, scaling, the bucket-cap sweep (their memory is
`reports.figures.memory`'s). Pure figure functions: tidy DataFrames in, a plotly Figure out. No I/O, no `show()`.

Each function answers one question of the run page. `configs` is the configs table of a run;
the step-level inputs are the reductions of `reports.aggregate`, never raw steps.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from harness.analysis import stats
from harness.analysis.scaling import pooled_scaling
from harness.results.values import ms_text, strategy_label, strategy_labels
from reports import aggregate
from reports.aggregate import has_repeats, labelled, sweep_centres, world_label
from reports.figures.style import new_figure, strategy_colours, styled, value_text

__all__ = [
    "bucket_cap_sweep",
    "scaling",
    "step_time_by_strategy",
    "strategy_label",
    "throughput_by_strategy",
]


def _whiskers(rows: pd.DataFrame, *, median: str, low: str, high: str) -> dict:
    return {
        "type": "data",
        "symmetric": False,
        "array": (rows[high] - rows[median]).clip(lower=0),
        "arrayminus": (rows[median] - rows[low]).clip(lower=0),
    }


def speed_order(rows: pd.DataFrame) -> list[str]:
    """Strategy labels fastest first, by step time (pooled over repeats as the answer ranks them) at the largest
    world size each was measured at."""
    if rows.empty:
        return []
    largest = rows.sort_values("world_size").groupby("label", sort=False).tail(1)
    return list(largest.sort_values("step_ms_median", kind="stable")["label"])


def scaling_order(rows: pd.DataFrame, column: str) -> list[str]:
    """Strategy labels by `column` (a scaling efficiency) at the largest world size each reached, highest first:
    the legend in the order its lines end (it was grouped by name: 'stock bucket_cap_mb=25' above '=5')."""
    largest = rows.sort_values("world_size").groupby("label", sort=False).tail(1)
    return list(largest.sort_values(column, ascending=False, kind="stable")["label"])


def pooled_repeats(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per strategy (its label without the repeat) and world size, over its repeats: `value` the geometric mean
    of `column` (a step time or a throughput: the answer ranks strategies by the geometric mean of the repeats'
    median steps, the estimate its ratios are built around), `low`/`high` the lowest and highest repeat,
    `step_ms_median` that geometric mean of the repeats' median steps (speed_order), `repeats` how many, and
    `parity_failed` whether any repeat failed parity."""
    rows = rows.assign(
        label=strategy_labels(rows),
        parity_failed=rows["parity_ok"].eq(False),  # None means not judged
    )
    pooled = rows.groupby(["label", "world_size"], sort=False).agg(
        value=(column, stats.geometric_mean), low=(column, "min"), high=(column, "max"),
        step_ms_median=("step_ms_median", stats.geometric_mean), repeats=(column, "size"),
        parity_failed=("parity_failed", "any"),
    )  # fmt: skip
    return pooled.reset_index()


def _bars_by_strategy(configs: pd.DataFrame, *, workload: str, column: str, hover: str, whiskers: bool) -> go.Figure:
    """One bar per strategy in each world-size group, fastest first, its value on it in three significant figures
    (`value_text`, also `%{text}` in `hover`: 0.458 samples/s, not '0'); a strategy that failed parity gets
    '(PARITY FAILED)' in its legend entry and a hatched bar. With repeats, the bar is the geometric mean over the
    repeats (pooled_repeats), its whiskers span the lowest to the highest repeat and a
    dot marks each repeat; with one, the whiskers (`whiskers`) span the steps' p10–p90."""
    figure = new_figure()
    ok = labelled(configs, workload=workload)
    repeated = has_repeats(ok)
    single = ok.assign(value=ok[column], parity_failed=ok["parity_ok"].eq(False))
    bars = pooled_repeats(ok, column) if repeated else single
    dots = ok.assign(label=strategy_labels(ok))
    colours = strategy_colours(bars)
    for label in speed_order(bars):
        rows = bars[bars["label"] == label]
        failed_parity = bool(rows["parity_failed"].any())
        if repeated:
            error_y = _whiskers(rows, median="value", low="low", high="high")
        else:
            error_y = (
                _whiskers(rows, median="step_ms_median", low="step_ms_p10", high="step_ms_p90") if whiskers else None
            )
        figure.add_trace(
            go.Bar(
                name=label + (" (PARITY FAILED)" if failed_parity else ""),
                legendgroup=label,
                offsetgroup=label,
                marker_color=colours[label],
                x=[world_label(n) for n in rows["world_size"]],
                y=rows["value"],
                error_y=error_y,
                marker_pattern_shape="x" if failed_parity else "",
                text=[value_text(value) for value in rows["value"]],
                texttemplate="%{text}",
                textposition="outside",
                cliponaxis=False,
                hovertemplate=hover
                + (" (geometric mean of %{customdata} repeats)" if repeated else "")
                + "<extra>%{fullData.name}</extra>",
                customdata=rows["repeats"] if repeated else None,
            )
        )
        if repeated:
            mine = dots[dots["label"] == label]
            figure.add_trace(
                go.Scatter(
                    name=f"{label}: each repeat", legendgroup=label, offsetgroup=label, showlegend=False,
                    x=[world_label(n) for n in mine["world_size"]], y=mine[column], mode="markers",
                    text=[value_text(value) for value in mine[column]],
                    marker={"color": "rgba(0,0,0,0.55)", "size": 5},
                    hovertemplate=hover + " (one repeat)<extra></extra>",
                )
            )  # fmt: skip
    if repeated:
        figure.update_layout(scattermode="group")  # each repeat's dot over its own strategy's bar
    return figure


def step_time_by_strategy(configs: pd.DataFrame, *, workload: str) -> go.Figure:
    """Median step time per strategy (bars) and world size (groups), whiskers p10 to p90; with repeats, the
    geometric mean over them, whiskers from the lowest to the highest repeat (_bars_by_strategy)."""
    figure = _bars_by_strategy(configs, workload=workload, column="step_ms_median", hover="%{y:.2f} ms",
                               whiskers=True)  # fmt: skip
    repeated = has_repeats(labelled(configs, workload=workload))
    whiskers = ("each repeat's median, bars their geometric mean, whiskers lowest–highest repeat" if repeated
                else "whiskers p10–p90")  # fmt: skip
    return styled(
        figure,
        title=f"{workload}: median step time ({whiskers}; lower is better)",
        barmode="group",
        xaxis_title="world size",
        yaxis_title="step time (ms)",
        legend_title="strategy",
    )


def throughput_by_strategy(configs: pd.DataFrame, *, workload: str) -> go.Figure:
    """Samples per second over all ranks, per strategy and world size, over the measured window's wall time."""
    column = aggregate.throughput_column(labelled(configs, workload=workload))
    over = "over the measured window" if column == aggregate.WINDOW_THROUGHPUT else "from the median step"
    figure = _bars_by_strategy(configs, workload=workload, column=column, hover="%{text} samples/s",
                               whiskers=False)  # fmt: skip
    return styled(
        figure,
        title=f"{workload}: throughput (samples/s over all ranks, {over}; higher is better)",
        barmode="group",
        xaxis_title="world size",
        yaxis_title="samples/s",
        legend_title="strategy",
    )


def scaling(configs: pd.DataFrame, *, workload: str) -> go.Figure:
    """Weak-scaling efficiency against world size, one line per strategy, and the ideal 1.0: against one plain
    process (`local` at one rank) where the run has one, so that each strategy's own cost at one rank counts
    and the lines order as the step times do, else against each strategy's own one-rank step (the axis says
    which; the other figure in the hover). With repeats, each point is pooled over them (scaling.pooled_scaling:
    the repeats' centre of throughput at n ranks over n × their centre at one rank), as the sentence quotes."""
    # Pooled even with one repeat: figured from samples_per_s as the sentence is (rows from before the per-row
    # column hold nulls there, so drawing the stored one put the chart against another baseline than the sentence).
    rows = pooled_scaling(labelled(configs, workload=workload))
    rows["label"] = strategy_labels(rows)
    rows = rows.dropna(subset=["scaling_efficiency"])
    vs_local = len(rows) and rows["scaling_efficiency_vs_local"].notna().all()
    shown = "scaling_efficiency_vs_local" if vs_local else "scaling_efficiency"
    hover = "%{x} ranks: %{y:.3f}" + (", against its own one-rank step %{customdata:.3f}" if vs_local else "")
    figure = new_figure()
    colours = strategy_colours(rows)
    for label in scaling_order(rows, shown):  # the legend reads as the lines end, best first, as the bars rank
        group = rows[rows["label"] == label].sort_values("world_size")
        figure.add_trace(go.Scatter(name=label, x=group["world_size"], y=group[shown], mode="lines+markers",
                                    line_color=colours[label], customdata=group["scaling_efficiency"],
                                    hovertemplate=hover + "<extra>%{fullData.name}</extra>"))  # fmt: skip
    worlds = sorted(rows["world_size"].unique().tolist()) or [1]
    figure.add_trace(
        go.Scatter(
            name="ideal", x=[worlds[0], worlds[-1]], y=[1.0, 1.0], mode="lines", line={"dash": "dash", "color": "#888"}
        )
    )
    against = "local's at 1 rank" if vs_local else "its own at 1 rank"  # the bars' are over the window: not these
    # Past 1.0 is no scaling past linear: a step measured faster than its base (zero at 1.44 at one rank, read as odd)
    base = "local at 1 rank" if vs_local else "each one's own step at 1 rank"
    above = ("<br><sup>above 1.0: faster than linear from that base, which no strategy is: the noise of the steps "
             "(the answer's noise column)</sup>" if (rows[shown] > 1.005).any() else "")  # fmt: skip
    return styled(
        figure,
        title=f"{workload}: weak-scaling efficiency against {base} (1.0 = linear){above}",
        xaxis={"title": "world size", "tickvals": worlds, "type": "log" if worlds[-1] > 8 else "linear"},
        yaxis={"title": f"samples/s from the median step: at n / (n × {against})", "rangemode": "tozero"},
        legend_title="strategy",
    )


def bucket_cap_sweep(
    configs: pd.DataFrame,
    *,
    workload: str,
    strategy: str,
    recommended: dict[int, tuple[float, float]] | None = None,
) -> go.Figure:
    """Step time against bucket_cap_mb (log x), one line per world size through each cap's centre over
    its repeats (the geometric mean of their medians, as the sweep's verdict pools them), whiskers its
    95 % interval over repeats (none with one repeat). A star where the recommendation names a cap at a
    world size (`recommended`: world size → (cap, the recommendation's best_step_ms)), at its own figure;
    none where it names none (a flat optimum, too few repeats, world size 1)."""
    centres = sweep_centres(configs, workload=workload)
    centres = centres[centres["strategy"] == strategy]
    caps = sorted(centres["bucket_cap_mb"].unique().tolist())
    stars = sorted((recommended or {}).items())
    top = sweep_axis_top(centres, [ms for _, (_, ms) in stars])
    figure = new_figure()
    for world, group in centres.groupby("world_size"):
        group = group.sort_values("bucket_cap_mb")
        figure.add_trace(
            go.Scatter(
                name=world_label(world),
                x=group["bucket_cap_mb"],
                y=group["step_ms"],
                mode="lines+markers",
                error_y=_whiskers(group.assign(high_ms=group["high_ms"].clip(upper=top)), median="step_ms",
                                  low="low_ms", high="high_ms"),
                customdata=group["repeats"].map(stats.repeats_text).to_frame().assign(
                    interval=_interval_words(group)).to_numpy(),
                hovertemplate="%{x:g} MiB: %{y:.3g} ms (geometric mean of %{customdata[0]}' medians; "
                "%{customdata[1]})<extra>%{fullData.name}</extra>",
            )
        )  # fmt: skip
    cut = centres[centres["high_ms"] > top]
    if not cut.empty:  # whiskers cut at the axis: an arrow at the edge says so, its hover gives the whole interval
        figure.add_trace(go.Scatter(
            name="95% interval runs past the axis (cut)", x=cut["bucket_cap_mb"], y=[top] * len(cut), mode="markers",
            marker={"symbol": "arrow-up", "size": 12, "color": "#555"}, cliponaxis=False,
            customdata=cut.assign(ranks=cut["world_size"].map(world_label))[["ranks", "low_ms", "high_ms"]],
            hovertemplate="%{x:g} MiB at %{customdata[0]}: 95% interval %{customdata[1]:.3g}–"
            "%{customdata[2]:.3g} ms<extra></extra>",
        ))  # fmt: skip
    if stars:
        figure.add_trace(
            go.Scatter(
                name="recommended cap",
                x=[cap for _, (cap, _) in stars],
                y=[ms for _, (_, ms) in stars],
                mode="markers+text",
                text=[f"{cap:g} MiB" for _, (cap, _) in stars],
                textposition="top center",
                hovertext=[
                    f"recommended for {world_label(w)}: {cap:g} MiB, {ms_text(ms)} ms" for w, (cap, ms) in stars
                ],
                marker={"symbol": "star", "size": 16, "color": "gold", "line": {"color": "black", "width": 1}},
            )
        )
    return styled(
        figure,
        title=f"{workload} · {strategy}: step time against bucket_cap_mb (centre of repeats, whiskers 95% interval)",
        xaxis={"title": "bucket_cap_mb (log)", "type": "log", "tickvals": caps, "ticktext": [f"{c:g}" for c in caps]},
        yaxis={"title": "step time, geometric mean of repeats' medians (ms)", "range": [0, top]},
        legend_title="world size",
    )


SWEEP_HEADROOM = 2.0
"""The sweep's y-axis reaches at most twice its slowest point: a 95 % interval of two repeats reached 1,700 ms
over a 124 ms point and flattened every line; a whisker past the edge is cut there, and marked."""


def _interval_words(group: pd.DataFrame) -> list[str]:
    """Each point's 95 % interval for its hover, or that one repeat has none (NaN printed as an interval lied)."""
    pairs = zip(group["low_ms"], group["high_ms"], strict=True)
    return [f"95% interval {ms_text(low)}–{ms_text(high)} ms" if pd.notna(low) and pd.notna(high)
            else "one repeat: no interval" for low, high in pairs]  # fmt: skip


def sweep_axis_top(centres: pd.DataFrame, stars: list[float]) -> float:
    """The top of the sweep's y-axis: every whisker whole where they fit under SWEEP_HEADROOM × the slowest point
    (a centre or a star), else that."""
    points = [*centres["step_ms"].dropna(), *stars] or [1.0]
    reach = max([*points, *centres["high_ms"].dropna()])
    return float(min(reach, max(points) * SWEEP_HEADROOM) * 1.05)
