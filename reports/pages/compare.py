"""The comparison page of two runs: per configuration, the ratio with its interval and the verdict,
as a figure and a table. Rendering only: `harness.analysis.verdicts.compare` computes the table; this turns it
into a page of the site (with a small .json beside it, which the index links from).

Columns the analysis does not give (an older or newer verdict layer) show as "—".
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from harness.analysis import stats
from harness.analysis.verdicts import compare as comparing
from harness.results import store
from reports.figures.style import new_figure, styled
from reports.pages import evidence
from reports.pages.compare_memory import memory_section
from reports.pages.html import FigureList, esc, page, table

VERDICT_CLASS = {"slower": "failed", "faster": "ok"}
MISSING = "—"


def _get(row, column: str):
    value = getattr(row, column, None)
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else value


def configuration_label(row) -> str:
    strategy = comparing.named(row)  # as everywhere (values.configuration_label); as shipped: its pair
    # in the console's order ('w2 mlp/tiny stock'), so a line of `compare` finds its row on the page
    parts = [f"w{_get(row, 'world_size')}", f"{_get(row, 'workload')}/{_get(row, 'size')}", strategy.strip()]
    return " ".join(p for p in parts if p)


def _number(value, pattern: str) -> str:
    return MISSING if value is None else pattern.format(value)


def comparison_table(frame: pd.DataFrame) -> str:
    head = [
        "configuration",
        "base ms",
        "new ms",
        "ratio",
        f"{comparing.interval_level(frame)} interval",
        "p (one configuration's)",
        "verdict",
        "noise",
    ]
    rows, classes = [], []
    for r in frame.itertuples():
        low, high = _get(r, "ratio_ci_low"), _get(r, "ratio_ci_high")
        verdict = str(_get(r, "verdict") or MISSING)
        if verdict == "too few repeats to tell" and _get(r, "repeats_needed") is not None:
            have = min(_get(r, "base_repeats") or 0, _get(r, "new_repeats") or 0)
            so_far = f"{_get(r, 'leaning')} so far, not yet shown beyond the threshold; " if _get(r, "leaning") else ""
            verdict += f" ({so_far}have {have}, {stats.needed_text(_get(r, 'repeats_needed'), have)})"
        rows.append([
            esc(configuration_label(r)), _number(_get(r, "base_ms"), "{:.2f}"), _number(_get(r, "new_ms"), "{:.2f}"),
            _number(_get(r, "ratio"), "{:.3f}"), MISSING if low is None or high is None else f"{low:.3f}–{high:.3f}",
            _number(_get(r, "p_value"), "{:.2g}"),
            f"<b>{esc(verdict)}</b>" if verdict in VERDICT_CLASS else esc(verdict), esc(_get(r, "noise") or ""),
        ])  # fmt: skip
        classes.append(VERDICT_CLASS.get(verdict, ""))
    return table(head, rows, row_classes=classes)


WIDEST = 4.0
"""The figure shows ratios from 1/WIDEST to WIDEST: an interval of two repeats may reach 0.008–170, which on a
linear axis left every point at 1; its whiskers run off the edge and the hover and the table give it whole."""


def _ratio_range(series: list[pd.Series], threshold: float) -> list[float]:
    """The log axis's range (log10): every ratio and interval end, and the threshold band, within 1/WIDEST–WIDEST."""
    values = pd.concat(series).replace([np.inf, -np.inf], np.nan).dropna()
    low = min([1 - threshold, *values[values > 0]]) / 1.1
    high = max([1 + threshold, *values]) * 1.1
    return [float(np.log10(max(low, 1 / WIDEST))), float(np.log10(min(high, WIDEST)))]


RATIO_TICKS = ((0.25, 0.5, 0.8, 1, 1.25, 2, 4), (0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2),
               (0.8, 0.9, 0.95, 1, 1.05, 1.1, 1.25))  # fmt: skip
"""The ratio axis's ticks, coarse to fine: plotly's own log ticks read '3 4 5 … 9 1 2', so 0.3 looked like 3."""


def ratio_ticks(axis_range: list[float]) -> dict:
    """Labelled ticks ('0.5×', '1×', '2×') for a log axis over `axis_range` (log10): the coarsest set with four
    ticks inside it, else the set with the most."""
    low, high = 10 ** axis_range[0], 10 ** axis_range[1]
    inside = [[tick for tick in ticks if low <= tick <= high] for ticks in RATIO_TICKS]
    chosen = next((ticks for ticks in inside if len(ticks) >= 4), max(inside, key=len))
    return {"tickvals": chosen, "ticktext": [f"{tick:g}×" for tick in chosen]}


def ratio_figure(frame: pd.DataFrame, *, threshold: float) -> go.Figure:
    """Each configuration's ratio new/base with its interval; the band is ±threshold around 1 (no change)."""
    labels = [configuration_label(r) for r in frame.itertuples()]
    ratio = frame["ratio"].astype(float) if "ratio" in frame else pd.Series(np.nan, index=frame.index)
    low = frame["ratio_ci_low"].astype(float) if "ratio_ci_low" in frame else ratio
    high = frame["ratio_ci_high"].astype(float) if "ratio_ci_high" in frame else ratio
    figure = new_figure(
        go.Scatter(
            x=ratio, y=labels, mode="markers", marker={"size": 10, "color": "#4c78a8"}, name="new / base",
            error_x={"type": "data", "symmetric": False, "array": (high - ratio).fillna(0).clip(lower=0),
                     "arrayminus": (ratio - low).fillna(0).clip(lower=0)},
            customdata=np.stack([low, high], axis=-1),
            hovertemplate="%{y}: ratio %{x:.3f} (" + comparing.interval_level(frame) + " interval "
                          "%{customdata[0]:.3f}–%{customdata[1]:.3f})<extra></extra>",
        )
    )  # fmt: skip
    figure.add_vrect(x0=1 - threshold, x1=1 + threshold, fillcolor="#999", opacity=0.15, line_width=0)
    figure.add_vline(x=1.0, line_dash="dash", line_color="#555")
    axis_range = _ratio_range([ratio, low, high], threshold)
    for trace in _cut_arrows(labels, low, high, axis_range):
        figure.add_trace(trace)
    return styled(
        figure,
        title=f"new / base step time per configuration: the ratio of the repeats' geometric means, whiskers its "
        f"{comparing.interval_level(frame)} interval (grey band: ±{threshold * 100:g}%, the threshold)",
        xaxis={
            "title": "ratio, log scale (below 1: new is faster; above: slower)",
            "type": "log",
            "range": axis_range,
            **ratio_ticks(axis_range),
        },
        height=max(300, 40 * len(labels) + 140),
        showlegend=False,
    )


def _cut_arrows(labels: list[str], low: pd.Series, high: pd.Series, axis_range: list[float]) -> list[go.Scatter]:
    """An arrow at the axis's edge for each whisker that runs past it (WIDEST): a two-repeat interval of 0.036–20.9
    read as a plain line to the edge, as if it ended there; the hover gives it whole, as the table does."""
    edges = (("arrow-left", 10 ** axis_range[0], low < 10 ** axis_range[0] * 0.999),
             ("arrow-right", 10 ** axis_range[1], high > 10 ** axis_range[1] * 1.001))  # fmt: skip
    return [
        go.Scatter(
            x=[edge] * int(cut.sum()),
            y=[label for label, c in zip(labels, cut, strict=True) if c],
            mode="markers",
            marker={"symbol": symbol, "size": 12, "color": "#555"},
            cliponaxis=False,
            customdata=np.stack([low[cut], high[cut]], axis=-1),
            hovertemplate="%{y}: the interval runs past the axis: "
            "%{customdata[0]:.3g}–%{customdata[1]:.3g}<extra></extra>",
        )
        for symbol, edge, cut in edges
        if cut.any()
    ]


OUTCOME_CLASS = {comparing.UNDECIDED: "banner", comparing.PASSED: "headline"}  # what failed the gate: "alarm"


def comparison_page(base: str, new: str, frame: pd.DataFrame, judged: dict, *, environment: list[str],
                    not_judged: list[str], threshold: float, commands: dict | None = None,
                    run_pages: tuple[str, ...] = (), compared_by: str = "") -> str:  # fmt: skip
    """`judged`: harness.analysis.verdicts.compare.outcome's; `environment`: how the runs' machines and software differ;
    `not_judged`: BASE's configurations without a verdict (failed or missing in NEW, a setting differs); `run_pages`:
    those of the two runs whose pages the site holds, linked; `compared_by`: the compare command that made it (its
    flags: the next compare of the pair overwrites the page)."""
    runs = "".join(f'<a href="../runs/{esc(quote(run))}.html">{role} {esc(run)}</a>'
                   for role, run in (("BASE", base), ("NEW", new)) if run in run_pages)  # fmt: skip
    parts = [
        f'<nav><a href="../index.html">all runs</a>{runs}</nav>',
        f"<h1>{esc(comparing.comparison_name(base, new))}</h1>",
        f"<p>BASE {esc(base)}, NEW {esc(new)}: did NEW get slower than BASE?</p>",
        f'<p class="{OUTCOME_CLASS.get(judged["outcome"], "alarm")}">{esc(_capitalised(judged["sentence"]))}'
        f"{esc(' (exit ' + str(judged['exit_code']) + ')') if 'exit_code' in judged else ''}.</p>",
        "".join(
            f"<p>{role} {esc(run)} ran <code>{esc(line)}</code></p>"
            for role, run in (("BASE", base), ("NEW", new))
            if (line := (commands or {}).get(run))
        ),  # BASE first, named: a kept comparison's keys come back sorted
        f"<p>Compared by <code>{esc(compared_by)}</code></p>" if compared_by else "",
        f"<p>Ratio = new / base step time: per repeat the median step (slowest rank per step), then the "
        f"geometric mean over repeats. A configuration is <b>slower</b> or <b>faster</b> only when the "
        f"{comparing.interval_level(frame)} interval of the ratio (Welch's t over repeats"
        f"{esc(comparing.family_words(frame))}) {evidence.decided_rule(threshold)}; <b>no significant "
        f"change</b> where {evidence.no_change_rule(threshold)}; when the repeats cannot decide, "
        "<b>too few repeats to tell</b> (docs/statistics.md).</p>",
    ]
    if environment:
        items = "".join(f"<li>{esc(w)}</li>" for w in environment)
        parts.append(f'<div class="banner"><b>The environments differ</b>; compare with care:<ul>{items}</ul></div>')
    if not_judged:
        items = "".join(f"<li>{esc(w)}</li>" for w in not_judged)
        parts.append(f'<div class="banner"><b>Not judged</b> ({len(not_judged)} of {esc(base)}\'s '
                     f"configurations):<ul>{items}</ul></div>")  # fmt: skip
    if frame.empty:
        parts.append("<p>No configuration was measured in both runs.</p>")
        return page(f"ddpbench compare: {comparing.comparison_name(base, new)}", "\n".join(parts), depth=1, plots=False)
    caption = (
        f"Each point is a configuration's ratio; the whisker is its {comparing.interval_level(frame)} interval "
        "where the runs have the repeats; an arrow at the edge marks one that runs past the axis (the table gives "
        "it whole)."
    )
    parts.append(FigureList().add(ratio_figure(frame, threshold=threshold), caption))
    parts.append(comparison_table(frame))
    parts.append(memory_section(frame, configuration_label))
    return page(f"ddpbench compare: {comparing.comparison_name(base, new)}", "\n".join(parts), depth=1)


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def write_comparison_page(out: Path, base: str, new: str, frame: pd.DataFrame, judged: dict, *,
                          environment: list[str], not_judged: list[str], threshold: float,
                          commands: dict[str, str] | None = None, compared_by: str = "") -> Path:  # fmt: skip
    """The page, and beside it the facts the index lists: the outcome and its counts (written last: the index
    only links whole pages). It links the two runs' pages that the site holds now."""
    from reports.site import write_plotly_asset  # the page's figure needs it, even before a `ddpbench report`

    write_plotly_asset(Path(out))
    path = Path(out) / "compare" / f"{base}_vs_{new}.html"
    held = tuple(run for run in (base, new) if (Path(out) / "runs" / f"{run}.html").is_file())
    text = comparison_page(base, new, frame, judged, environment=environment, not_judged=not_judged,
                           threshold=threshold, commands=commands, run_pages=held, compared_by=compared_by)  # fmt: skip
    store.atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    store.write_json(path.with_suffix(".json"), {"base": base, "new": new, **judged})
    return path


def write_kept_comparisons(results: Path, out: Path) -> int:
    """Each comparison `ddpbench compare` kept beside the runs (layout.COMPARISONS), its page written into the site
    `out` as compare wrote it; how many. One that cannot be read is named and skipped."""
    from harness.results.layout import COMPARISONS

    written = 0
    for kept in sorted((Path(results) / COMPARISONS).glob("*.json"), key=lambda p: p.stat().st_mtime):  # newest last
        try:
            facts = store.read_json(kept)
            write_comparison_page(out, facts["base"], facts["new"], pd.DataFrame(facts["rows"]), facts["judged"],
                                  environment=facts["environment"], not_judged=facts["not_judged"],
                                  threshold=facts["threshold"], commands=facts.get("commands"),
                                  compared_by=facts.get("compared_by", ""))  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logging.getLogger("ddpbench").warning("skipping comparison %s: %s", kept, exc)
            continue
        written += 1
    return written
