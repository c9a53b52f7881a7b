"""The static site in `reports/site/`: read every run, write its pages, ship plotly.js once.

    index.html              every run, newest first
    index.json              what the index lists of each run, so that `ddpbench compare` can list its page, and
                            the cluster of the what-if pages, which a plain `report` builds them on again
    runs/<folder>.html      one page per run (its folder's name: the run id unless copied)
    runs/<folder>.whatif.html   the run's profile on a cluster it did not run on (`report --cluster`)
    collectives/<run_id>.html   one page per `ddpbench collectives` run
    compare/<base>_vs_<new>.html  one page per `ddpbench compare` (`report` writes those kept in results/comparisons/)
    <name>.html             a page `predict --page` wrote into the site's folder (marked html.SHARED_PAGE), listed,
                            and linked on its run's line (html.RUN_MARK)
    assets/plotly.min.js    plotly.js, shipped once (no CDN: the site works offline)

This is the only module of `reports/` that touches files; the HTML comes from `reports.pages.run.run_page` and
`reports.pages`, the figures from `reports.figures`, `reports.figures.steps` and `reports.figures.network`.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import logging
import os
import re
import shlex
from pathlib import Path
from urllib.parse import quote

from harness.analysis.verdicts import history as answer_history
from harness.analysis.verdicts.environment import fault_rows
from harness.perfmodel.predict import accumulated_in as accumulated  # as predict --run, none of a K>1 run
from harness.results import contention, layout, model_tables, store
from harness.results.invocation import page_run_words, report_command, resume_command
from reports import aggregate, step_series
from reports.pages import index as pages
from reports.pages import pooled
from reports.pages.html import BOOK_MARK, PLOTLY_ASSET, RUN_MARK, SHARED_PAGE
from reports.pages.run import run_page
from reports.pages.whatif import page as whatif

log = logging.getLogger("ddpbench")

INDEX_FACTS = "index.json"
DEFAULT_CLUSTER = "dgx-h100"
"""The cluster of the what-if pages where neither `--cluster` nor an earlier build of the site names one."""

STEP_COLUMNS = [
    "config_id",
    "rank",
    "step",
    "warmup",
    "step_ms",
    "forward_ms",
    "backward_ms",
    "sync_ms",
    "optimizer_ms",
    "exposed_comm_ms",
    "exposed_backward_ms",
    "exposed_forward_ms",
    "exposed_optimizer_ms",
]


@dataclasses.dataclass(frozen=True)
class BuiltSite:
    index: Path
    run_pages: dict[str, Path]
    whatif_pages: dict[str, Path] = dataclasses.field(default_factory=dict)
    collectives_pages: dict[str, Path] = dataclasses.field(default_factory=dict)


def write_text(path: Path, text: str) -> None:
    store.atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_plotly_asset(out: Path) -> None:
    from plotly.offline import get_plotlyjs

    target = out / PLOTLY_ASSET
    script = get_plotlyjs()
    # Rewritten only when plotly changed: an unchanged asset keeps its timestamp for static hosts' caches.
    if not target.exists() or target.stat().st_size != len(script.encode("utf-8")):
        write_text(target, script)


def trace_files(run: Path, configs) -> dict[str, list[str]]:
    """Per profiled configuration, the trace files in its folder (one per rank)."""
    if "trace_dir" not in configs:
        return {}
    found = {}
    for config_id, folder in zip(configs["config_id"], configs["trace_dir"], strict=True):
        if isinstance(folder, str) and folder and (run / folder).is_dir():
            found[config_id] = sorted(p.name for p in (run / folder).iterdir() if p.is_file())
    return found


def read_run(run: Path, *, pages: Path | None = None) -> aggregate.RunData:
    """One run reduced for its page; `pages` is the folder its page goes into (for relative links)."""
    meta = store.read_run_meta(run)
    meta.setdefault("run_id", run.name)
    steps = store.read_steps(run)
    configs = store.read_configs(run)
    href = Path(os.path.relpath(run.resolve(), pages.resolve())).as_posix() if pages is not None else str(run)
    return aggregate.summarize_run(
        meta,
        configs,
        steps[STEP_COLUMNS],
        store.read_ranks(run),
        store.read_recommendations(run),
        timeline=step_series.typical_step_timeline(store.read_timeline(run), steps),
        gradprofiles=model_tables.read_gradprofiles(run),
        floor=model_tables.read_floor(run),
        predictions=model_tables.read_predictions(run),
        decisions=answer_history.run_history(meta, configs, steps),
        traces=trace_files(run, configs),
        run_href=href,
        run_path=str(run),
    )


def write_collectives_pages(results: Path, out: Path) -> list[dict]:
    """One page per collectives run (collectives/<run_id>.html); their metadata for the index."""
    metas = []
    for run in model_tables.list_collectives_runs(results):
        meta = model_tables.read_collectives_meta(run)
        frame = model_tables.read_collectives(run)
        meta = {
            **meta,
            "run_id": run.name,
            "ops": sorted(set(frame["op"])),
            "world_sizes": sorted(set(frame["world_size"])),
        }
        write_text(
            out / "collectives" / f"{run.name}.html",
            pages.collectives_page(meta, frame, model_tables.read_contention(run)),
        )
        metas.append(meta)
    return metas


def read_comparisons(out: Path) -> list[dict]:
    """The comparison pages `ddpbench compare` wrote into this site (each has a .json beside it), newest first."""
    found = []
    for sidecar in sorted((out / "compare").glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        page = sidecar.with_suffix(".html")
        try:
            facts = store.read_json(sidecar)
        except (OSError, ValueError) as exc:
            log.warning("skipping comparison %s: %s", sidecar, exc)
            continue
        if page.is_file():
            found.append({**facts, "href": f"compare/{quote(page.name)}"})
    return found


HEAD_BYTES = 4096
"""How much of a page's start holds its marker and title (the head, before its style and plotly.js inlined)."""


def read_shared_pages(out: Path) -> list[dict]:
    """The pages `predict --page` wrote into the site's own folder, by the marker it writes (html.SHARED_PAGE), not
    by name: {"href", "title", "run", "book"} each (its run's folder, html.RUN_MARK, and what it books, html.BOOK_MARK;
    '' on a page from before), by name. Any
    other .html file there is not ddpbench's to list."""
    found = []
    for path in sorted(Path(out).glob("*.html")):
        try:
            with path.open("rb") as file:
                head = file.read(HEAD_BYTES).decode("utf-8", errors="replace")
        except OSError as exc:
            log.warning("skipping page %s: %s", path, exc)
            continue
        title = re.search(r"<title>(.*?)</title>", head, re.S)
        marks = head.split("<title>", 1)[0]
        if SHARED_PAGE in marks and title:
            run, book = (re.search(re.escape(mark).replace(re.escape("{}"), '([^"]*)'), marks)
                         for mark in (RUN_MARK, BOOK_MARK))  # fmt: skip
            found.append({"href": quote(path.name), "title": html.unescape(title.group(1)),
                          "run": html.unescape(run.group(1)) if run else "",
                          "book": html.unescape(book.group(1)) if book else ""})  # fmt: skip
    return found


def write_whatif_page(run_folder: Path, meta: dict, configs, cluster, out: Path, *, profiles=None,
                      **as_predict) -> str | None:  # fmt: skip
    """The run's what-if page on `cluster` when it stored a gradient-ready profile; its file name. Without one,
    a page an earlier build wrote is removed: nothing links it any more, and its cluster is not this build's.
    `as_predict`: how it counts what predict counts beside its steps (whatif.whatif_page's memory, full_params,
    checked); `profiles`: the run's gradient-ready profiles where the caller has read them."""
    profiles = model_tables.read_gradprofiles(run_folder) if profiles is None else profiles
    name = f"{run_folder.name}.whatif.html"
    if cluster is None or profiles.empty:
        (out / "runs" / name).unlink(missing_ok=True)
        return None
    write_text(out / "runs" / name, whatif.whatif_page(meta, configs, profiles, cluster, **as_predict))
    return name


def no_whatif_words(meta: dict, configs, cluster) -> str:
    """Why the site wrote no what-if page of a run on `cluster`, and the commands that give it one, as they run: bench
    records the gradient profile the page rests on at one rank only, so a run of one world size (--largest-only) has
    none; `predict --run --cluster` measures one and stores it with the run (on the run's device), and the next
    report writes the page. '' where a page was not asked for (no cluster)."""
    if cluster is None:
        return ""
    if accum := accumulated(configs):
        return (
            f"it measured gradient accumulation (--grad-accum {','.join(map(str, accum))}), which the what-if model "
            "does not price yet (it prices one micro-batch and one sync a step); a run at --grad-accum 1 gets one"
        )
    ok = configs.loc[configs["status"] == "ok", "world_size"] if "status" in configs else configs.get("world_size", [])
    flag = " (--largest-only)" if (meta.get("config") or {}).get("ladder") is False else ""
    if 1 in {int(w) for w in ok}:
        why = "it stored no gradient profile (bench records one at 1 rank)"
    else:
        why = f"it ran no configuration at 1 rank{flag}, where bench records the gradient profile the page rests on"
    device = meta.get("device") or "cpu"
    where = "" if device == "cpu" else f" on a machine with its {device} device"
    predict = f"ddpbench predict --run {page_run_words(meta)} --cluster {shlex.quote(cluster_key(cluster))}"
    report = report_command(meta.get("results_folder"), meta.get("site_folder"))
    # a run of one world size: its memory per rank (a share fitted from two world sizes) stays out of the page too
    memory = "; its memory per rank needs two world sizes: a bench without --largest-only" if flag else ""
    return (f"{why}; `{predict}`{where} measures one and stores it with the run, then `{report}` writes the "
            f"page{memory}")  # fmt: skip


def build_site(*, results: Path, out: Path, cluster=None, on_run=None, as_predict=None, on_step=None) -> BuiltSite:
    """Every run's page (and, given a cluster profile, its what-if page), the index, plotly.js once. `on_run(folder,
    page, whatif page or None, why it has none: no_whatif_words)` hears of each run's pages as they are written
    (the command's progress);
    `as_predict(run folder, configs)`: what its what-if page counts as predict does (write_whatif_page);
    `on_step(text, within=run)` hears of each run's long parts as they start ('[1/3] run f1: its what-if page on
    dgx-h100', within '[1/3] run f1')."""
    out = Path(out)
    write_plotly_asset(out)
    summaries = []
    run_pages: dict[str, Path] = {}
    whatif_pages: dict[str, Path] = {}
    comparisons = read_comparisons(out)  # each run page links those it takes part in
    shared = read_shared_pages(out)  # and the pages `predict --page` wrote of it into the site
    folders = store.list_runs(results)
    for number, run_folder in enumerate(folders, 1):
        step = (
            functools.partial(_said_of, on_step, f"[{number}/{len(folders)}] run {run_folder.name}")
            if on_step
            else None
        )
        written = write_run(run_folder, out, cluster, comparisons=comparisons, shared=shared, as_predict=as_predict,
                            on_step=step)  # fmt: skip
        if written is None:
            continue
        row, run_pages[run_folder.name], whatif_page = written
        if whatif_page is not None:
            whatif_pages[run_folder.name] = whatif_page
        if on_run is not None:
            on_run(run_folder.name, run_pages[run_folder.name], whatif_page, row.get("whatif_missing", ""))
        summaries.append(row)
    collectives = write_collectives_pages(results, out)
    store.write_json(out / INDEX_FACTS, {"runs": summaries, "collectives": collectives,
                                         "cluster": cluster_key(cluster)})  # fmt: skip
    collectives_pages = {meta["run_id"]: out / "collectives" / f"{meta['run_id']}.html" for meta in collectives}
    return BuiltSite(index=write_index(out), run_pages=run_pages, whatif_pages=whatif_pages,
                     collectives_pages=collectives_pages)  # fmt: skip


def _said_of(on_step, run: str, what: str) -> None:
    on_step(f"{run}: {what}", within=run)  # a log: one line a run, of the part that took long


def write_run(
    run_folder: Path, out: Path, cluster, *, comparisons: list[dict], shared: list[dict], as_predict=None, on_step=None
) -> tuple[dict, Path, Path | None] | None:
    """One run's page and what-if page (build_site's, each run's): its index row and the two pages' paths; None where
    the run cannot be read (said). The run page and the what-if page link the pages of `shared` that are of it.
    `on_step(what)`: each long part as it starts. Its configs are read once and changed by none of its pages: each
    workload's rows are pooled once for all of them (pooled.kept_while)."""
    with pooled.kept_while():
        return _write_run(run_folder, out, cluster, comparisons=comparisons, shared=shared, as_predict=as_predict,
                          on_step=on_step or (lambda what: None))  # fmt: skip


def _write_run(run_folder: Path, out: Path, cluster, *, comparisons, shared, as_predict, on_step):
    on_step("reading it")
    try:
        run = read_run(run_folder, pages=out / "runs")
    except (store.UnsupportedSchema, OSError, ValueError, KeyError) as exc:
        log.warning("skipping run %s: %s", run_folder, exc)  # one bad run must not cost the site
        return None
    # Named by folder: two folders may carry one run id (a copied run), and each keeps its page.
    run.meta["page"] = run_folder.name
    # Where its commands find it and rebuild its site, as the user gave them (invocation.page_run_words).
    run.meta["results_folder"], run.meta["site_folder"] = str(run_folder.parent), str(out)
    run.meta["ended"] = pages.ended(_summary(run_folder), run.meta)  # its status: stopped, or maybe still running
    run.meta["resume_command"] = resume_command(run.meta["run_id"], run_folder.parent)  # what finishes it, if stopped
    run.meta["fault_configs"] = fault_rows(run.meta, contention.read(run_folder))  # the rows a fault's mark is of
    run.meta["comparisons"] = [c for c in comparisons if run_folder.name in (c["base"], c["new"])]
    run.meta["predict_pages"] = [p for p in shared if p["run"] == run_folder.name]  # at a GPU step given
    profiles = run.gradprofiles  # read with the run
    priced = None if accumulated(run.configs) else cluster  # as predict --run, none of a run it would refuse
    if priced is not None and not profiles.empty:
        on_step(f"its what-if page on {priced.name}")
    counts = as_predict(run_folder, run.configs) if as_predict and priced is not None and not profiles.empty else {}
    try:
        run.meta["whatif"] = write_whatif_page(run_folder, run.meta, run.configs, priced, out, profiles=profiles,
                                             **counts)  # fmt: skip
    except Exception as exc:  # a prediction's fault must not cost the measured run its page, nor the site
        log.warning("what-if page of run %s not written (%s: %s); its run page and the rest are: please report "
                    "this", run_folder.name, type(exc).__name__, exc)  # fmt: skip
        (out / "runs" / f"{run_folder.name}.whatif.html").unlink(missing_ok=True)
        run.meta["whatif"] = None
    run.meta["whatif_cluster"] = getattr(cluster, "name", None)
    run.meta["whatif_missing"] = "" if run.meta["whatif"] or (priced and not profiles.empty) else no_whatif_words(
        run.meta, run.configs, cluster)  # fmt: skip
    run.meta["whatif_steps"] = whatif.steps_known(run.meta)  # else its communication and memory alone
    path = out / "runs" / f"{run_folder.name}.html"
    on_step("its page")
    write_text(path, run_page.run_page(run))
    whatif_path = out / "runs" / run.meta["whatif"] if run.meta["whatif"] else None
    return pages.index_row(run.meta, run.configs), path, whatif_path


def _summary(run_folder: Path) -> dict:
    """The run's summary.json, which a session writes at its end (complete or stopped); {} where none can be read."""
    try:
        summary = store.read_json(run_folder / layout.SUMMARY_JSON)
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def relink_run(run_folder: Path, out: Path, cluster, *, as_predict=None) -> Path | None:
    """After `predict --page` wrote a page of `run_folder` into the site in `out`: that run's page and what-if page
    again (on `cluster`, the site's last build's), which link it, and the index; None where `out` holds no site
    built by this version of `ddpbench report`, or none with a page of that run (its next build links it)."""
    run_folder, out = Path(run_folder), Path(out)
    if not (out / INDEX_FACTS).is_file() or not (out / "runs" / f"{run_folder.name}.html").is_file():
        return refresh_index(out)
    try:
        facts = store.read_json(out / INDEX_FACTS)
        written = write_run(run_folder, out, cluster, comparisons=read_comparisons(out), shared=read_shared_pages(out),
                            as_predict=as_predict)  # fmt: skip
        if written is not None:
            facts["runs"] = [written[0] if r.get("page") == run_folder.name else r for r in facts["runs"]]
            store.write_json(out / INDEX_FACTS, facts)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("could not link the page from run %s's page in %s: %s", run_folder.name, out, exc)
    return refresh_index(out)


def cluster_key(cluster) -> str:
    """What `report --cluster` takes to load `cluster` again: a built-in's name, else its file's absolute path (a
    later `report` may run from another folder); '' for none."""
    from harness.perfmodel.clusters.cluster import is_builtin

    if cluster is None:
        return ""
    return cluster.name if is_builtin(cluster) or not cluster.path else str(Path(cluster.path).resolve())


def last_cluster(out: Path) -> str | None:
    """The cluster the site in `out` was last built with, as cluster_key wrote it ('' for none); None where no build
    recorded one (no site there, or one built before ddpbench recorded it)."""
    try:
        kept = store.read_json(Path(out) / INDEX_FACTS).get("cluster")
    except (OSError, ValueError, AttributeError):
        return None
    return kept if isinstance(kept, str) else None


def write_index(out: Path) -> Path:
    """index.html from the runs the last build listed (index.json) and the comparisons in the site now."""
    facts = store.read_json(out / INDEX_FACTS)
    index = out / "index.html"
    write_text(index, pages.index_page(facts["runs"], facts["collectives"], read_comparisons(out),
                                       read_shared_pages(out)))  # fmt: skip
    return index


def refresh_index(out: Path) -> Path | None:
    """After `ddpbench compare` (or `predict --page`) wrote into a built site: its index again, now listing the
    comparison (or the page); None where `out` holds no site built by this version of `ddpbench report` (its next
    build lists it)."""
    if not (Path(out) / INDEX_FACTS).is_file():
        return None
    try:
        return write_index(Path(out))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("could not list the comparison in %s: %s", Path(out) / "index.html", exc)
        return None
