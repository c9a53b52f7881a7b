"""The run page's profiles: for each configuration measured with `--profile`, its trace files (one
per rank), how to open them, and the warning that its times were measured under the profiler.
Pure: the configs and the file names `reports.site` found in, HTML out."""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import quote

import pandas as pd

from reports.pages.html import esc, table

PERFETTO = "https://ui.perfetto.dev"


def profiled(configs: pd.DataFrame) -> pd.DataFrame:
    if "trace_dir" not in configs:
        return configs.iloc[0:0]
    return configs[configs["trace_dir"].notna() & (configs["trace_dir"].astype(str) != "")].sort_values("config_id")


def profile_alert(configs: pd.DataFrame) -> list[str]:
    rows = profiled(configs)
    if rows.empty:
        return []
    return [
        f'<b>Profiled:</b> {len(rows)} configuration(s) ran under torch.profiler (<a href="#profiles">traces</a>); '
        "their times include the profiler's overhead, so compare them with each other, not with unprofiled runs."
    ]


def profiles_section(configs: pd.DataFrame, traces: dict[str, list[str]], *, run_href: str, run_path: str) -> str:
    """`traces`: config_id -> trace file names; `run_href`: the run folder relative to the page (for links);
    `run_path`: the run folder as the reader's shell sees it (for the HTA snippet)."""
    rows = profiled(configs)
    if rows.empty:
        return ""
    cells = []
    for r in rows.itertuples():
        folder = str(r.trace_dir)
        files = traces.get(r.config_id, [])
        links = ", ".join(
            f'<a href="{esc(quote(str(PurePosixPath(run_href) / folder / name)))}">{esc(name)}</a>' for name in files
        )
        cells.append([esc(r.config_id), f"<code>{esc(folder)}/</code>", links or "no trace file found"])
    example = f"{run_path}/{rows['trace_dir'].iloc[0]}"
    snippet = (
        "from hta.trace_analysis import TraceAnalysis  # pip install HolisticTraceAnalysis\n"
        f'analyzer = TraceAnalysis(trace_dir="{example}")\n'
        "analyzer.get_temporal_breakdown()  # compute, communication, idle per rank\n"
        "analyzer.get_comm_comp_overlap()   # how much communication overlapped compute"
    )
    return (
        "<h2 id=profiles>Profiles</h2>"
        "<p>Each configuration below ran under <code>torch.profiler</code>: one Chrome-trace file per rank, in "
        "one folder per configuration. Its times were measured <b>under the profiler</b>, which slows every "
        "step; read the traces for where time goes, not for how long it takes.</p>"
        f'<p>Open a file in <a href="{PERFETTO}">Perfetto UI ({PERFETTO})</a> ("Open trace file"; nothing is '
        "uploaded), or analyse a configuration's folder with Holistic Trace Analysis:</p>"
        f"<pre>{esc(snippet)}</pre>" + table(["configuration", "folder (in the run)", "trace per rank"], cells)
    )
