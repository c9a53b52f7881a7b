"""Pure figure functions: a tidy DataFrame in, a plotly Figure out. No I/O, no `show()`."""

from __future__ import annotations

import json

import pandas as pd
import plotly.graph_objects as go


def strategy_label(row: pd.Series) -> str:
    """The strategy with the options that distinguish it, e.g. 'stock bucket_cap_mb=25'."""
    options = json.loads(row["impl_options"]) if isinstance(row["impl_options"], str) else {}
    return " ".join([row["impl"], *(f"{k}={v}" for k, v in sorted(options.items()))])


def step_time_by_strategy(configs: pd.DataFrame, *, workload: str) -> go.Figure:
    """Median step time per strategy (bars) and world size (groups), whiskers p10 to p90.

    A strategy that failed parity gets '(PARITY FAILED)' in its legend entry.
    """
    ok = configs[(configs["status"] == "ok") & (configs["workload"] == workload)].copy()
    ok["label"] = ok.apply(strategy_label, axis=1)
    figure = go.Figure()
    for label, rows in ok.groupby("label", sort=False):
        rows = rows.sort_values("world_size")
        failed_parity = (rows["parity_ok"] == False).any()  # noqa: E712 (None means not judged)
        figure.add_trace(
            go.Bar(
                name=label + (" (PARITY FAILED)" if failed_parity else ""),
                x=[f"{n} rank{'s' if n > 1 else ''}" for n in rows["world_size"]],
                y=rows["step_ms_median"],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": rows["step_ms_p90"] - rows["step_ms_median"],
                    "arrayminus": rows["step_ms_median"] - rows["step_ms_p10"],
                },
                marker_pattern_shape="x" if failed_parity else "",
                hovertemplate="%{y:.2f} ms<extra>" + label + "</extra>",
            )
        )
    figure.update_layout(
        title=f"{workload}: median step time (whiskers p10–p90; lower is better)",
        barmode="group",
        xaxis_title="world size",
        yaxis_title="step time (ms)",
        legend_title="strategy",
        template="plotly_white",
    )
    return figure
