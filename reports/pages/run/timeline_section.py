"""The run page's bucket timeline, in section 4: the largest world size that timed collectives drawn open (where
they matter most), each other world size of two ranks or more folded under it, a figure each with its lines (what
each bucket holds, the collective the step waited for); one rank's, which has no other rank to wait for, named with
the file that holds it."""

from __future__ import annotations

import pandas as pd

from reports.aggregate import RunData, labelled
from reports.figures import timeline as timelinefigures
from reports.figures.captions import CAPTIONS
from reports.pages.html import FigureList, esc
from reports.pages.run import bucket_contents, held_up

RESIZE_ON_OPEN = "if(this.open)this.querySelectorAll('.js-plotly-plot').forEach(function(d){Plotly.Plots.resize(d)})"
"""A figure drawn inside a closed fold has no width to take: it takes the page's once the fold opens."""


def timeline_figures(run: RunData, workload: str, figs: FigureList, *, shown: pd.DataFrame, note: str) -> list[str]:
    """The timeline at each world size of `workload` that timed collectives, largest first, the others folded
    (`shown`: one repeat a configuration, `note` the caption's word on it)."""
    if run.timeline.empty:
        return []
    timed = shown[shown["config_id"].isin(run.timeline["config_id"]) & (shown["workload"] == workload)]
    sizes = sorted({int(w) for w in timed["world_size"]}, reverse=True)
    if not sizes:
        return []
    contents = bucket_contents.bucket_contents(timed, run.timeline, run.gradprofiles)
    parts = _at(run, workload, figs, shown=shown, world_size=sizes[0], contents=contents, note=note)
    for world_size in (w for w in sizes[1:] if w > 1):
        drawn = _at(run, workload, figs, shown=shown, world_size=world_size, contents=contents, note=note,
                    caption=f"The figure above, at {world_size} ranks.")  # fmt: skip
        parts.append(f'<details ontoggle="{RESIZE_ON_OPEN}"><summary>The bucket timeline at {world_size} ranks'
                     f"</summary>{''.join(drawn)}</details>")  # fmt: skip
    if 1 in sizes[1:]:
        parts.append(f"<p class=caption>{esc(one_rank_words(run, timed))}</p>")
    return parts


def _at(run: RunData, workload: str, figs: FigureList, *, shown, world_size: int, contents, note: str,
        caption: str = CAPTIONS["timeline"]) -> list[str]:  # fmt: skip
    figure = timelinefigures.bucket_timeline(shown, run.timeline, workload=workload, world_size=world_size,
                                             holds=contents.of)  # fmt: skip
    if figure is None:
        return []
    here = labelled(shown, workload=workload)
    here = here[(here["world_size"] == world_size) & here["config_id"].isin(run.timeline["config_id"])]
    labels = dict(zip(here["config_id"], here["label"], strict=True))
    lines = bucket_contents.contents_lines(contents, labels)
    lines += held_up.held_up_lines(shown, run.timeline, workload=workload, world_size=world_size, holds=contents.of)
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return [figs.add(figure, caption, once=note), f"<ul class=why>{items}</ul>" if items else ""]


def one_rank_words(run: RunData, timed: pd.DataFrame) -> str:
    """Why one rank's timeline is not drawn, and where it is."""
    ids = sorted(timed.loc[timed["world_size"] == 1, "config_id"])
    where = f"{run.run_path or 'the run folder'}/timeline/<config_id>.parquet"
    return (f"The bucket timeline at 1 rank is not drawn: no other rank to wait for or to send to. "
            f"Its rows are in {where} ({', '.join(ids)}).")  # fmt: skip
