"""The site's other pages: the index of every run, and one page per `ddpbench collectives` run.
No file I/O (that is `reports.site`); the run page is `reports.pages.run.run_page`, the HTML helpers
`reports.pages.html`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from harness.analysis.verdicts import compare as comparing
from harness.analysis.verdicts.environment import FAULT_VARIABLE, fault_share, kept_fault
from harness.perfmodel import network
from reports import aggregate
from reports.aggregate import machine_summary
from reports.figures import network as netfigures
from reports.pages import alerts, headline, pooled
from reports.pages.alerts import COMPLETE, STOPPED
from reports.pages.html import FigureList, esc, page, reproduce_html, shared_link, table

BUSBW_CAPTION = (  # under the first op's figure only: it holds for each
    "In each chart, higher is better: bus bandwidth (algorithm bandwidth × the nccl-tests factor) per message size; "
    "small messages are latency-bound, the plateau is what the link sustains. Red crosses: a wrong result."
)


def joined(values: Any) -> str:
    return ", ".join(str(v) for v in sorted(set(values)))


def run_headline(configs: pd.DataFrame, meta: dict[str, Any] | None = None) -> str:
    """Per workload, the fastest communicating strategy at the largest world size, in words (headline.run_answers)."""
    return "<br>".join(answer.line for answer in headline.run_answers(configs, meta)) or "nothing measured"


def status_text(meta: dict[str, Any], configs: pd.DataFrame) -> str:
    counts = alerts.status_counts(meta, configs)
    text = ", ".join(f"{n} {status}" for status, n in counts.items() if n or status == "ok")
    if counts["not run"]:
        said = alerts.ended_words(meta, configs)
        return f'<span class="failed">{esc(text)}{f" ({said})" if said else ""}</span>'
    return f'<span class="failed">{esc(text)}</span>' if counts["failed"] else esc(text)


def ended(summary: dict[str, Any], meta: dict[str, Any]) -> str | None:
    """How the run's files say it ended: COMPLETE or STOPPED by its last session's summary.json (`summary`, {} where
    none), None where they do not say (no summary yet, or a later session in run.json's `sessions` wrote none: a
    resume still running, or killed)."""
    if not summary or int(summary.get("sessions") or 1) < len(meta.get("sessions") or []):
        return None
    return COMPLETE if summary.get("complete") else STOPPED


def comparison_links(folder: str, comparisons: list[dict[str, Any]]) -> str:
    """The comparisons a run takes part in, each named as on its page (BASE → NEW) on both runs' rows; compare names
    runs by folder, as the site names pages."""
    links = [f'<a href="{esc(c["href"])}">{esc(comparing.comparison_name(c["base"], c["new"]))}</a>'
             for c in comparisons if folder in (c["base"], c["new"])]  # fmt: skip
    return "<br>".join(links)


def index_row(meta: dict[str, Any], configs: pd.DataFrame) -> dict[str, str]:
    """One run's line of the index, its cells as HTML: what `index_page` lists, and what the site keeps in
    index.json so that `ddpbench compare` can list a new comparison without reading every run again."""
    run_id = meta["run_id"]
    return {"run_id": str(run_id), "page": str(meta.get("page", run_id)), "started_at": str(meta.get("started_at")),
            "fastest": _fault_mark(meta) + _on_the_cpu(meta) + run_headline(configs, meta),
            "machine": esc(machine_summary(meta, configs)),
            "strategies": esc(joined(configs.get("impl", []))), "status": status_text(meta, configs),
            "whatif": str(meta.get("whatif") or ""), "whatif_cluster": str(meta.get("whatif_cluster") or ""),
            "whatif_what": "" if meta.get("whatif_steps", True) else "its communication and memory",
            "whatif_missing": str(meta.get("whatif_missing") or "")}  # fmt: skip


def _on_the_cpu(meta: dict[str, Any]) -> str:
    """A CPU run's answer named as what it is, before it: the CPU's fastest is no strategy or cap to book on a GPU (a
    CPU's compute hides communication a GPU's would not; its optimizer is a larger share), and the reader is sent
    to the run's what-if page, where the site wrote one: what holds there whatever the GPU computes."""
    if meta.get("device") != "cpu":
        return ""
    whatif = (f'; on a GPU cluster: <a href="runs/{esc(quote(meta["whatif"]))}">what if on '
              f'{esc(meta.get("whatif_cluster") or "")}</a>' if meta.get("whatif") else "")  # fmt: skip
    return f"<i>here, on the CPU (gloo): no GPU's strategy or cap to book{whatif}</i><br>"


def _fault_mark(meta: dict[str, Any]) -> str:
    """The answer cell of a run with a fault injected on purpose, marked before its answer, which is the fault's:
    where a row kept ran with it set (a retry without it measured the others again), saying how many."""
    fault = kept_fault(meta)
    share = f", {fault_share(meta)}" if fault_share(meta) else ""
    return (
        f'<span class="failed">fault injected ({esc(FAULT_VARIABLE)}={esc(fault)}{esc(share)}):</span> '
        if fault
        else ""
    )


def index_page(
    runs: list[dict[str, str]],
    collectives: list[dict[str, Any]] = (),
    comparisons: list[dict[str, Any]] = (),
    shared: list[dict[str, str]] = (),
) -> str:
    """The dashboard: one line per run (`index_row`) with its answer (fastest strategy and its time), its status
    and its comparisons; then every comparison, the collectives runs, and the pages `predict --page` wrote into
    the site's folder (`shared`: site.read_shared_pages)."""
    comparisons = list(comparisons)
    shared = list(shared)
    rows = [[f'<a href="runs/{esc(quote(r["page"]))}.html">{esc(r["run_id"])}</a><br><small>{esc(r["started_at"])}'
             f"</small>{_whatif_link(r, shared)}", r["fastest"], r["machine"], r["strategies"], r["status"],
             comparison_links(r["page"], comparisons)] for r in runs]  # fmt: skip
    # the column's meaning is the intro's: as its header it took 11 lines a cell at 420 px, pushing the answer off
    head = ["run", "leading strategy", "machine", "strategies", "configurations", "comparisons (BASE → NEW)"]
    listing = (
        table(head, rows)
        if rows
        else "<p>No runs yet: <code>make bench</code> (or <code>ddpbench bench</code>) writes one.</p>"
    )
    body = (
        "<h1>ddpbench runs</h1><p>Newest first. The leading strategy: the one to deploy where one was measured, at "
        "the largest world size on the run's own machine, its step the geometric mean of repeats; 'fastest' where "
        "decided. Each run page opens with the answer (strategies ranked by step time, the bucket cap to use) and "
        "then shows how it scales, where the time goes, what it costs in memory, and whether to trust it.</p>"
        + listing
        + comparisons_index(comparisons)
        + collectives_index(list(collectives))
        + shared_index(shared)
    )
    return page("ddpbench runs", body, depth=0, plots=False)


def _whatif_link(row: dict[str, str], shared: list[dict[str, str]] = ()) -> str:
    """The run's what-if page under its name, where the site wrote one (an index.json from before: none), and what
    it gives where not the steps (a CPU's profile); then the pages `predict --page` wrote of this run into the site
    (`shared`), each under its title and what it books (shared_link): the answer at a GPU step given, which the
    site's own page does not give."""
    what = f": {row['whatif_what']}" if row.get("whatif_what") else ""
    own = (f'<br><a href="runs/{esc(quote(row["whatif"]))}">what if on {esc(row.get("whatif_cluster", ""))}{esc(what)}'
           "</a>" if row.get("whatif") else "")  # fmt: skip
    return own + "".join(f"<br>{shared_link(p)}" for p in shared if p.get("run") == row["page"])


def comparisons_index(comparisons: list[dict[str, Any]]) -> str:
    """Every comparison with its outcome (what `compare`'s exit code said) and the counts it rests on; a page
    written before outcomes were recorded shows '—' for them."""
    if not comparisons:
        return ""
    rows = [[f'<a href="{esc(c["href"])}">{esc(comparing.comparison_name(c["base"], c["new"]))}</a>',
             _outcome_cell(c), *(esc(c.get(key, pooled.MISSING)) for key in COMPARISON_COUNTS), _not_judged_cell(c)]
            for c in comparisons]  # fmt: skip
    return (
        "<h2>Comparisons</h2><p><code>ddpbench compare BASE NEW</code> pages, each named BASE → NEW (slower: "
        "NEW's step longer than BASE's).</p>"
    ) + table(
        ["comparison (BASE → NEW)", "outcome", "configurations matched", "slower", "faster", "no significant change",
         "too few repeats", "not judged"], rows,
    )  # fmt: skip


COMPARISON_COUNTS = ("matched", "slower", "faster", "unchanged", "too_few")
NOT_JUDGED = {"failed": "failed in NEW", "not_compared": "not compared (a setting differs)",
              "missing": "no ok result in NEW"}  # fmt: skip
"""BASE's configurations without a verdict, as compare's count line names them: the index once left them out."""


def _not_judged_cell(comparison: dict[str, Any]) -> str:
    """'1 failed in NEW, 2 no ok result in NEW', '0', or '—' for a comparison kept before the counts were."""
    if not all(key in comparison for key in NOT_JUDGED):
        return pooled.MISSING
    said = ", ".join(f"{comparison[key]} {words}" for key, words in NOT_JUDGED.items() if comparison[key])
    return f'<span class="failed">{esc(said)}</span>' if comparison["failed"] else esc(said or "0")


def _outcome_cell(comparison: dict[str, Any]) -> str:
    word = comparison.get("outcome")
    return f'<span class="failed">{esc(word)}</span>' if comparing.regressed(word) else esc(word or pooled.MISSING)


def collectives_page(meta: dict[str, Any], frame: pd.DataFrame, contention: pd.DataFrame) -> str:
    """One collectives run: bus bandwidth against size per op and world size, the checks, the contention."""
    figs = FigureList()
    parts = ['<nav><a href="../index.html">all runs</a></nav>', f"<h1>Collectives {esc(meta.get('run_id'))}</h1>"]
    if meta.get("device") == "cpu":
        parts.append(
            '<p class="banner">Measured on the <b>CPU</b> with gloo, one process per simulated GPU'
            f"{esc(aggregate.threads_each(meta))}: loopback bandwidth on shared cores, "
            "not an interconnect.</p>"
        )
    parts.append(f"<p>Started {esc(meta.get('started_at'))} on {esc(meta.get('hostname'))}, "
                 f"{esc(meta.get('device'))}/{esc(meta.get('backend'))}.</p>")  # fmt: skip
    wrong = frame[~frame["correct"].astype(bool)]
    if not wrong.empty:
        cells = ", ".join(f"{r.op} w{r.world_size} {netfigures.size_label(r.bytes)}" for r in wrong.itertuples())
        parts.append(f'<p class="alarm">WRONG RESULTS: {esc(cells)}.</p>')
    parts.append(network_answer(frame, contention))
    for op in dict.fromkeys(frame["op"]):
        parts.append(figs.add(netfigures.busbw_vs_size(frame, op=op), "", once=BUSBW_CAPTION))
    parts.append("<h2>Every size</h2>" + collectives_table(frame))
    if not contention.empty:
        parts.append(contention_section(contention))
    parts.append(reproduce_html(meta.get("command"), meta.get("workloads")))
    return page(f"ddpbench collectives {meta.get('run_id')}", "\n".join(parts), depth=1)


def network_answer(frame: pd.DataFrame, contention: pd.DataFrame) -> str:
    """The collectives page's answer, before its charts: per world size the all-reduce's α and bus bandwidth as
    `ddpbench predict` and a run page's floor fit them (network.links_from_collectives itself, so the page cannot
    quote another fit), the sizes they rest on and how far the fit misses them; then the contention factors."""
    links = network.links_from_collectives(frame)
    said = [_fit_sentence(frame, world, link) for world, link in sorted(links.items())]
    if not said:
        said = ["No world size has two all-reduce sizes that passed their check: predict gets no network from it."]
    said += [_contention_sentence(r) for r in contention.itertuples()]
    lead = ("<b>The network as <code>ddpbench predict</code> and the run pages' floor see it</b> (for a run not given "
            "--busbw, they use the collectives run of its machine, device and backend started nearest the run; "
            "predict without a run, the newest): ")  # fmt: skip
    return f'<p class="headline">{lead}{esc(" ".join(said))}</p>'


def _fit_sentence(frame: pd.DataFrame, world: int, link) -> str:
    """'At 2 ranks: α 583 µs, bus bandwidth 1.34 GB/s, fitted to … (misses them by a median 37 %, at most 65 %).'"""
    rows = frame[(frame["op"] == "all_reduce") & frame["correct"].astype(bool) & (frame["world_size"] == world)]
    fitted = np.array([link.allreduce_s(size, world) * 1e6 for size in rows["bytes"]])
    misses = np.abs(fitted / rows["time_us"].to_numpy() - 1)
    busbw = (f"bus bandwidth {link.busbw_bytes_per_s / 1e9:.3g} GB/s" if np.isfinite(link.busbw_bytes_per_s)
             else "no bandwidth term (the times did not grow with size)")  # fmt: skip
    sizes = f"{netfigures.size_label(rows['bytes'].min())}–{netfigures.size_label(rows['bytes'].max())}"
    return (f"At {aggregate.world_label(world)}: α {link.alpha_s * 1e6:.3g} µs and {busbw}, fitted as time = α + "
            f"bytes × 2(n−1)/n / busbw to the median times of the {len(rows)} all-reduce sizes that passed their "
            f"check ({sizes}), weighing each size alike; the fit misses them by a median {np.median(misses):.0%}, at "
            f"most {misses.max():.0%}.")  # fmt: skip


def _bound(r) -> bool:
    """Whether compute's slowdown is only a lower bound (the burst's spread alone as long as its work during the
    all-reduce)."""
    at_least = getattr(r, "compute_slowdown_at_least", None)  # null: a run from before it was kept
    return bool(pd.notna(at_least) and at_least)


def _contention_sentence(r) -> str:
    latency = "" if pd.isna(r.latency_slowdown) else f", a 4 KiB one (all latency) {r.latency_slowdown:.2f}×"
    bound = f": at least {r.compute_slowdown:.2f}×" if r.compute_slowdown > 1.005 else ""
    compute = ("compute's slowdown while an all-reduce was in flight was not measured (the compute burst's own spread "
               f"alone was as long as the compute it did during the all-reduce{bound})" if _bound(r) else
               f"compute ran {r.compute_slowdown:.2f}× slower while an all-reduce was in flight")  # fmt: skip
    return (f"Overlapped at {aggregate.world_label(int(r.world_size))}, {compute}, an "
            f"{netfigures.size_label(r.bytes)} all-reduce {r.comm_slowdown:.2f}× "
            f"slower{latency} (each the median of the repeats' own ratios: the contention table below).")  # fmt: skip


def contention_section(contention: pd.DataFrame) -> str:
    """The contention table, each column saying what it holds: the times are medians over repeats, and a slowdown
    is the median of each repeat's own ratio, which the medians beside it need not reproduce."""
    rows = [[esc(aggregate.world_label(int(r.world_size))), f"{r.compute_alone_ms:.2f}",
             f"{r.compute_overlapped_ms:.2f}",
             f"at least {r.compute_slowdown:.2f}× (not measured: within noise)" if _bound(r)
             else f"{r.compute_slowdown:.2f}×",
             f"{r.comm_alone_ms:.2f}",
             f"{r.comm_overlapped_ms:.2f}", f"{r.comm_slowdown:.2f}×",
             "—" if pd.isna(r.latency_slowdown) else f"{r.latency_slowdown:.2f}×"]
            for r in contention.itertuples()]  # fmt: skip
    probe = netfigures.size_label(contention["bytes"].iloc[0])
    head = ["world size", "compute burst alone, ms (median of repeats)",
            "the burst with the all-reduce in flight, ms (median of repeats)",
            "compute slowdown while overlapped (median of the repeats' ratios)",
            f"{probe} all-reduce alone, ms (median of repeats)", "it during the burst, ms (median of repeats)",
            "all-reduce slowdown (median of the repeats' ratios)",
            "4 KiB all-reduce slowdown, its latency (median of the repeats' ratios)"]  # fmt: skip
    return ("<h2>Contention</h2><p>An all-reduce and a compute burst timed alone, then overlapped on the same rank "
            "(as DDP overlaps them): on the CPU they share cores. Every figure is the mean over ranks of each rank's "
            "median over repeats. The burst is made to outlast the all-reduce, so the first two columns time the "
            "whole burst, most of it with nothing in flight; the compute slowdown is the burst's extra time spread "
            "over the part of it the all-reduce overlapped (per repeat: the overlapped all-reduce's time / (that "
            "time − the burst's extra time), at least 1): how much slower compute runs while communication is in "
            "flight, not the ratio of the two medians beside it. The all-reduce slowdowns are each repeat's "
            "overlapped time over its time alone. <code>ddpbench predict</code> uses them: each bucket's latency at "
            "the 4 KiB one's slowdown, its bytes at the rest.</p>"
            + table(head, rows))  # fmt: skip


def collectives_table(frame: pd.DataFrame) -> str:
    rows = [
        [esc(r.op), esc(r.world_size), esc(netfigures.size_label(r.bytes)), f"{r.time_us:.1f}",
         f"{r.algbw_gbps:.3f}", f"{r.busbw_gbps:.3f}", "ok" if r.correct else "<b>WRONG</b>"]
        for r in frame.sort_values(["op", "world_size", "bytes"]).itertuples()
    ]  # fmt: skip
    head = ["op", "ranks", "size", "time µs (median)", "algbw GB/s", "busbw GB/s", "check"]
    return table(head, rows, row_classes=["" if r.correct else "failed" for r in frame.sort_values(
        ["op", "world_size", "bytes"]).itertuples()])  # fmt: skip


def shared_index(shared: list[dict[str, str]]) -> str:
    """The pages `predict --page` wrote beside the index (those of a run listed are on its line too): no run page
    links them (a page to share travels alone)."""
    if not shared:
        return ""
    items = "".join(f"<li>{shared_link(p)}</li>" for p in shared)
    return (
        "<h2>Predictions</h2><p>Pages <code>ddpbench predict --run RUN --cluster NAME --page FILE.html</code> "
        f"wrote into this folder: a run's profile on a cluster, each one file to share.</p><ul>{items}</ul>"
    )


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
