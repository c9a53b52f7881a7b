"""How every figure of a page looks: the palette, the line dashes, the template, the title's margins.
One strategy keeps one colour on a page (`strategy_colours`)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d", "#ff9da6", "#bab0ac")
DASHES = ("solid", "dot", "dash", "longdash", "dashdot", "longdashdot")


# A small template built once: plotly's stock ones are deep-copied into every figure, which made
# that copy the largest cost of a site build.
TEMPLATE = go.layout.Template(
    layout={
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "colorway": PALETTE,
        "font": {"color": "#2a3f5f"},
        "xaxis": {"gridcolor": "#ebf0f8", "linecolor": "#ebf0f8", "zerolinecolor": "#ebf0f8", "automargin": True},
        "yaxis": {"gridcolor": "#ebf0f8", "linecolor": "#ebf0f8", "zerolinecolor": "#ebf0f8", "automargin": True},
        "hovermode": "closest",
    }
)


def new_figure(*traces: go.BaseTraceType) -> go.Figure:
    return go.Figure(data=list(traces), layout={"template": TEMPLATE})


def strategy_colours(rows: pd.DataFrame) -> dict[str, str]:
    """One colour per strategy label, the same in every figure of a page (labels in sorted order)."""
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(sorted(set(rows["label"])))}


def styled(figure: go.Figure, *, title: str, **layout) -> go.Figure:
    figure.update_layout(title=title, margin={"t": 60, "b": 40}, **layout)
    return figure


def value_text(number: float) -> str:
    """'0.458', '12.3', '15257': three significant figures, whole numbers from 100 up (never '0' for 0.46, nor
    '1.23e+03'); '' for a missing value."""
    if number != number:
        return ""
    return f"{number:.0f}" if abs(number) >= 100 else f"{number:.3g}"


def memory_unit(values: pd.Series) -> tuple[str, float]:
    """('GiB', 1024) when the largest value is a GiB or more, else ('MiB', 1): the columns are MiB."""
    largest = pd.to_numeric(values, errors="coerce").max()
    return ("GiB", 1024.0) if pd.notna(largest) and largest >= 1024 else ("MiB", 1.0)


def merged_labels(x: pd.Series, y: pd.Series, labels: pd.Series, *, extent: tuple[float, float]) -> list[str]:
    """Each point's text label, where points closer than a label's width and height (6 % and 4 % of `extent`, the
    largest x and y drawn) share one: the leftmost names them all, the rest none, so none is drawn over another (a
    label starts right of its point)."""
    x_span, y_span = 0.06 * extent[0], 0.04 * extent[1]
    texts, owners = [""] * len(labels), []  # owners: (index, x, y) of the points whose label shows
    points = sorted(enumerate(zip(x, y, labels, strict=True)), key=lambda point: point[1][0])
    for k, (px, py, label) in points:
        near = next((o for o in owners if abs(px - o[1]) < x_span and abs(py - o[2]) < y_span), None)
        if near is None:
            owners.append((k, px, py))
            texts[k] = str(label)
        else:
            texts[near[0]] += f", {label}"
    return texts
