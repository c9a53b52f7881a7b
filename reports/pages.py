"""The site's other pages: the index of every run, and one page per `ddpbench collectives` run.
No file I/O (that is `reports.site`); the run page is `reports.run_page`, the HTML helpers `reports.html`.
"""

from __future__ import annotations

import shlex
from typing import Any
from urllib.parse import quote

import pandas as pd

from reports import aggregate, netfigures
from reports.aggregate import machine_summary, world_sizes
from reports.html import FigureList, esc, page, table

BUSBW_CAPTION = (
    "Higher is better: bus bandwidth (algorithm bandwidth × the nccl-tests factor) per message size; "
    "small messages are latency-bound, the plateau is what the link sustains. Red crosses: a wrong result."
)


def joined(values: Any) -> str:
    return ", ".join(str(v) for v in sorted(set(values)))


def index_page(runs: list[tuple[dict[str, Any], pd.DataFrame]], collectives: list[dict[str, Any]] = ()) -> str:
    rows = []
    for meta, configs in runs:
        run_id = meta["run_id"]
        ok = int((configs["status"] == "ok").sum()) if not configs.empty else 0
        rows.append(
            [
                f'<a href="runs/{esc(quote(run_id))}.html">{esc(run_id)}</a>',
                esc(meta.get("started_at")),
                esc(machine_summary(meta, configs)),
                esc(joined(configs.get("impl", []))),
                esc(joined(configs.get("workload", []))),
                esc(", ".join(str(w) for w in world_sizes(configs))),
                f"{ok}/{len(configs)} ok",
            ]
        )
    head = ["run", "started", "machine", "strategies", "workloads", "world sizes", "configurations"]
    listing = table(head, rows) if rows else "<p>No runs yet: <code>make bench</code>.</p>"
    body = (
        "<h1>ddpbench runs</h1><p>Newest first. Each run page answers which strategy is fastest, how it scales, "
        "which bucket cap to use, where the time goes, what it costs in memory, and whether to trust it.</p>"
        + listing
        + collectives_index(list(collectives))
    )
    return page("ddpbench runs", body, depth=0, plots=False)


def collectives_page(meta: dict[str, Any], frame: pd.DataFrame, contention: pd.DataFrame) -> str:
    """One collectives run: bus bandwidth against size per op and world size, the checks, the contention."""
    figs = FigureList()
    parts = ['<nav><a href="../index.html">all runs</a></nav>', f"<h1>Collectives {esc(meta.get('run_id'))}</h1>"]
    if meta.get("device") == "cpu":
        parts.append(
            '<p class="banner">Measured on the <b>CPU</b> with gloo, one process per simulated GPU '
            f"({esc(meta.get('threads_per_rank'))} thread(s) each): loopback bandwidth on shared cores, "
            "not an interconnect.</p>"
        )
    parts.append(f"<p>Started {esc(meta.get('started_at'))} on {esc(meta.get('hostname'))}, "
                 f"{esc(meta.get('device'))}/{esc(meta.get('backend'))}.</p>")  # fmt: skip
    wrong = frame[~frame["correct"].astype(bool)]
    if not wrong.empty:
        cells = ", ".join(f"{r.op} w{r.world_size} {netfigures.size_label(r.bytes)}" for r in wrong.itertuples())
        parts.append(f'<p class="alarm">WRONG RESULTS: {esc(cells)}.</p>')
    for op in dict.fromkeys(frame["op"]):
        parts.append(figs.add(netfigures.busbw_vs_size(frame, op=op), BUSBW_CAPTION))
    parts.append("<h2>Every size</h2>" + collectives_table(frame))
    if not contention.empty:
        rows = [[esc(aggregate.world_label(int(r.world_size))), f"{r.compute_alone_ms:.2f}",
                 f"{r.compute_overlapped_ms:.2f}", f"{r.compute_slowdown:.2f}×", f"{r.comm_alone_ms:.2f}",
                 f"{r.comm_overlapped_ms:.2f}", f"{r.comm_slowdown:.2f}×"]
                for r in contention.itertuples()]  # fmt: skip
        head = ["world size", "compute alone ms", "compute with all-reduce ms", "compute slowdown",
                "all-reduce alone ms", "all-reduce with compute ms", "all-reduce slowdown"]  # fmt: skip
        parts.append("<h2>Contention</h2><p>An all-reduce and a compute burst timed alone, then overlapped on the "
                     "same rank (as DDP overlaps them): on the CPU they share cores. `ddpbench predict` uses these "
                     "slowdowns.</p>" + table(head, rows))  # fmt: skip
    command = shlex.join(str(c) for c in meta.get("command") or [])
    parts.append(f"<h3>Reproduce</h3><pre>{esc(command)}</pre>")
    return page(f"ddpbench collectives {meta.get('run_id')}", "\n".join(parts), depth=1)


def collectives_table(frame: pd.DataFrame) -> str:
    rows = [
        [esc(r.op), esc(r.world_size), esc(netfigures.size_label(r.bytes)), f"{r.time_us:.1f}",
         f"{r.algbw_gbps:.3f}", f"{r.busbw_gbps:.3f}", "ok" if r.correct else "<b>WRONG</b>"]
        for r in frame.sort_values(["op", "world_size", "bytes"]).itertuples()
    ]  # fmt: skip
    head = ["op", "ranks", "size", "time µs (median)", "algbw GB/s", "busbw GB/s", "check"]
    return table(head, rows, row_classes=["" if r.correct else "failed" for r in frame.sort_values(
        ["op", "world_size", "bytes"]).itertuples()])  # fmt: skip


def collectives_index(runs: list[dict[str, Any]]) -> str:
    """The index's list of collectives runs (meta of each, with the ops and world sizes measured)."""
    if not runs:
        return ""
    rows = [[f'<a href="collectives/{esc(quote(m["run_id"]))}.html">{esc(m["run_id"])}</a>', esc(m.get("started_at")),
             esc(f"{m.get('device')}, {m.get('backend')}"), esc(m.get("hostname")), esc(", ".join(m.get("ops", []))),
             esc(", ".join(str(w) for w in m.get("world_sizes", [])))] for m in runs]  # fmt: skip
    head = ["collectives run", "started", "device, backend", "host", "ops", "world sizes"]
    return "<h2>Collectives</h2><p>Bus bandwidth per message size (<code>ddpbench collectives</code>).</p>" + table(
        head, rows
    )
