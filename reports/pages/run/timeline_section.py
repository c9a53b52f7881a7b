"""The run page's bucket timeline, in section 4: at the largest world size that timed collectives (where they
matter most), with its lines (what each bucket holds, the collective the step waited for)."""

from __future__ import annotations

import pandas as pd

from reports.aggregate import RunData, labelled
from reports.figures import timeline as timelinefigures
from reports.figures.captions import CAPTIONS
from reports.pages.html import FigureList, esc
from reports.pages.run import bucket_contents, held_up


def timeline_figures(run: RunData, workload: str, figs: FigureList, *, shown: pd.DataFrame, note: str) -> list[str]:
    """The timeline at the largest world size of `workload` that timed collectives (`shown`: one repeat a
    configuration, `note` the caption's word on it)."""
    if run.timeline.empty:
        return []
    timed = shown[shown["config_id"].isin(run.timeline["config_id"]) & (shown["workload"] == workload)]
    if timed.empty:
        return []
    contents = bucket_contents.bucket_contents(timed, run.timeline, run.gradprofiles)
    return _at(run, workload, figs, shown=shown, world_size=int(timed["world_size"].max()), contents=contents,
               note=note)  # fmt: skip


def _at(run: RunData, workload: str, figs: FigureList, *, shown, world_size: int, contents, note: str) -> list[str]:
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
    return [figs.add(figure, CAPTIONS["timeline"], once=note), f"<ul class=why>{items}</ul>" if items else ""]
