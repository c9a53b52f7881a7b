"""HTML helpers shared by every page: the page frame and its style, escaping, tables, figures.

Every string that came from a user or a run (ids, labels, command lines, errors) goes
through `esc`; figure data is escaped by plotly's JSON encoder (`<` becomes `\\u003c`).
Links are relative, so the folder can be copied to any static host or opened from disk.
"""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from harness.results.invocation import as_typed

PLOTLY_ASSET = "assets/plotly.min.js"
STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem}
body{color:#222}table{border-collapse:collapse;font-size:.85rem;margin:1rem 0}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left}th{background:#f4f4f4}
.failed{background:#fde2e2}.skipped{background:#f0f0f0;color:#666}.scroll{overflow-x:auto}
.banner{background:#fff6d6;border:1px solid #e9d48a;padding:.5rem 1rem;border-radius:4px}
details.banner summary{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;cursor:pointer}
details.banner[open] summary{white-space:normal}
.alarm{background:#fde2e2;border:2px solid #d62728;padding:.5rem 1rem;border-radius:4px;font-weight:600}
.caption{color:#444;font-size:.9rem;margin:.2rem 0 1.5rem}.figure{margin-bottom:1rem}
nav a{margin-right:1rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.5rem}
.warning{margin:.4rem 0}.headline{font-size:1.05rem;margin:.8rem 0 .2rem}.noisy td:last-child{color:#b35900}
code,pre{background:#f6f6f6;padding:.1rem .3rem;border-radius:3px;font-size:.8rem}pre{padding:.5rem;overflow-x:auto}
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value))


def code_spans(text: str) -> str:
    """`text` escaped, each `command` in it set as <code> (words shared with the console, which prints the
    backquotes)."""
    return "".join(f"<code>{part}</code>" if odd else part for odd, part in
                   ((i % 2, part) for i, part in enumerate(esc(text).split("`"))))  # fmt: skip


SHORT_NAME = 48
"""Longer names (a workload file's, a zoo model's with its options) are shortened in a table's cell, whole in a
tooltip; a heading, which has the width, takes HEADING_NAME (a walkthrough lost its options to the cut)."""
HEADING_NAME = 160


def name_html(name: Any, limit: int = SHORT_NAME) -> str:
    """A name for a page, escaped: shortened past `limit` characters (its whole in the tooltip)."""
    text = esc(name)
    whole = "" if name is None else str(name)
    if len(whole) <= limit:
        return text
    return f'<span title="{esc(whole)}">{esc(whole[: limit - 1])}…</span>'


SHARED_PAGE = '<meta name="generator" content="ddpbench predict --page">'
"""In the head of each page `predict --page` writes, before its title: how the index tells a page ddpbench wrote into
a site's folder from any other .html file there (site.read_shared_pages), without guessing by name."""
RUN_MARK = '<meta name="ddpbench-run" content="{}">'
"""Beside SHARED_PAGE: the folder of the run the page is of, by which the index links it on that run's line."""
BOOK_MARK = '<meta name="ddpbench-book" content="{}">'
"""Beside SHARED_PAGE: what the page's choice books at its most GPUs, as its table says it ('stock at 25 MiB, 300.3
ms at 64 GPUs'), which the index gives beside its link: read from the page, never derived again."""


def shared_link(shared: dict[str, str], *, up: str = "") -> str:
    """A page of `predict --page` (site.read_shared_pages) under its title, then what its choice books at its most GPUs
    as its head says it (BOOK_MARK: 'books stock at 25 MiB, 300.3 ms at 64 GPUs'), not derived again: an index showed
    a run's CPU leader in bold beside two such links whose pages booked another strategy, and only their titles. The
    index, the run page and the what-if page each link it so; `up`: the path from the linking page to the site's
    folder ('../' from runs/)."""
    book = f": books {esc(shared['book'])}" if shared.get("book") else ""
    return f'<a href="{up}{esc(shared["href"])}">{esc(shared["title"])}</a>{book}'


COMMAND = re.compile(r"(?:<code>|<pre>|&#x27;)ddpbench [a-z]+ ")
"""A ddpbench command a page prints, as a reader pastes it (not a mention, `<code>ddpbench predict</code>`)."""
VENV_NOTE = (
    "<p class=caption>The commands on this page start with <code>ddpbench</code>, as a shell where the clone's venv is "
    "active runs it (<code>source .venv/bin/activate</code>); without it, type <code>.venv/bin/ddpbench</code> in the "
    "clone.</p>"
)
"""Said once, at the end of a page that prints a command: a page may be read on another machine, so it names the
command as the README does, not by the path that ran it (harness.results.invocation); pasted without the venv, a
plain `ddpbench` is 'command not found'."""


def page(title: str, body: str, *, depth: int, plots: bool = True, inline: bool = False, shared: bool = False,
         run: str = "", book: str = "") -> str:  # fmt: skip
    """A whole page; only pages with plots load plotly.js (4 MB of script to parse): from the site's shared
    asset, or `inline`, inside the page, for a page that travels alone; `shared`: marked SHARED_PAGE, and `run`'s
    folder with it (RUN_MARK), by which a site's index links it on that run's line, and what it books (`book`:
    BOOK_MARK)."""
    script = f'<script src="{"../" * depth}{PLOTLY_ASSET}"></script>' if plots else ""
    if plots and inline:
        from plotly.offline import get_plotlyjs

        script = f"<script>{get_plotlyjs()}</script>"
    note = VENV_NOTE if COMMAND.search(body) else ""  # once, where the page prints a command
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"{SHARED_PAGE if shared else ''}{RUN_MARK.format(esc(run)) if shared and run else ''}"
        f"{BOOK_MARK.format(esc(book)) if shared and book else ''}"
        f"<title>{esc(title)}</title>"
        f"<style>{STYLE}</style>{script}</head>\n<body>\n{body}\n{note}</body></html>\n"
    )


def figure_html(figure: go.Figure, *, caption: str, div_id: str) -> str:
    """The figure's div (plotly.js comes from the shared asset) and its one-line caption."""
    height = figure.layout.height or 450
    div = figure.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        default_height=f"{height}px",
        config={"displaylogo": False, "responsive": True},
    )
    said = f'<p class="caption">{esc(caption)}</p>' if caption else ""  # a caption said once, under an earlier figure
    return f'<div class="figure">{div}{said}</div>'


class FigureList:
    """Collects a page's figures with unique div ids (stable across rebuilds, so pages diff well)."""

    def __init__(self) -> None:
        self.count = 0
        self.said: set[str] = set()

    def add(self, figure: go.Figure | None, caption: str, *, once: str = "") -> str:
        """The figure's HTML; '' for None (a figure with nothing to draw). `once`: a note that applies to this
        and later figures, added to the first drawn figure's caption only (said six times, it read as noise)."""
        if figure is None:
            return ""
        self.count += 1
        if once and once not in self.said:
            self.said.add(once)
            caption += once
        return figure_html(figure, caption=caption, div_id=f"figure-{self.count}")


def format_number(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return esc(value)


def table(head: list[str], rows: list[list[str]], *, row_classes: list[str] | None = None) -> str:
    """An HTML table from already-escaped cells."""
    classes = row_classes or [""] * len(rows)
    header = "".join(f"<th>{h}</th>" for h in head)
    body = "".join(
        f'<tr class="{cls}">' + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
        for cls, row in zip(classes, rows, strict=True)
    )
    return f"<div class=scroll><table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table></div>"


def facts_table(facts: list[tuple[str, str]]) -> str:
    """Name–value rows without a header row (the names are the header), values escaped here."""
    body = "".join(f"<tr><th>{esc(name)}</th><td>{esc(text)}</td></tr>" for name, text in facts)
    return f"<div class=scroll><table class=facts><tbody>{body}</tbody></table></div>"


def reproduce_html(command: list[Any] | None, workloads: dict[str, dict] | None = None) -> str:
    """The run's command to run again, as a new run: without its --run-id, which names a folder that now
    exists (a second run under it is refused), and with each workload file named by the absolute path the
    run recorded (`workloads`: run.json's provenance), so that it runs from any folder."""
    words = _with_recorded_files(as_typed([str(c) for c in command or []]), workloads or {})
    kept = [w for i, w in enumerate(words) if not (w == "--run-id" or w.startswith("--run-id=")
                                                   or (i and words[i - 1] == "--run-id"))]  # fmt: skip
    note = " (as a new run: without its --run-id)" if len(kept) < len(words) else ""
    return f"<h3>Reproduce{note}</h3><pre>{esc(shlex.join(kept))}</pre>"


def _with_recorded_files(words: list[str], workloads: dict[str, dict]) -> list[str]:
    """`--workloads` with each file given as typed ('my_model.py:MyNet') replaced by the spec the run recorded
    for it ('/home/me/my_model.py:MyNet'); names, zoo specs and paths already absolute as they were."""
    recorded = [p for p in workloads.values() if isinstance(p, dict) and p.get("path") and p.get("spec")]

    def absolute(part: str) -> str:
        return _recorded_spec(part, recorded) or part

    out = list(words)
    for i, word in enumerate(words):
        if i and words[i - 1] == "--workloads":
            out[i] = ",".join(absolute(part) for part in word.split(","))
        elif word.startswith("--workloads="):
            out[i] = "--workloads=" + ",".join(absolute(part) for part in word.split("=", 1)[1].split(","))
    return out


def _recorded_spec(typed: str, recorded: list[dict]) -> str | None:
    """The one recorded spec whose file the typed spec names (its absolute path ends with the typed path, its
    class is the typed one); None where none or several do (two config.json files: the path tells them apart)."""
    hf = typed.startswith("hf:")
    path, _, name = (typed[3:], "", "") if hf else typed.partition(":")
    found = set()
    for provenance in recorded:
        spec = str(provenance["spec"])
        same_class = hf or spec.endswith(f":{name}")
        if _ends_with(str(provenance["path"]), path) and spec.startswith("hf:") == hf and same_class:
            found.add(spec)
    return found.pop() if len(found) == 1 else None


def _ends_with(recorded_path: str, typed_path: str) -> bool:
    """Whether a recorded absolute path ends with a path as typed (relative, without '..')."""
    typed_parts = [part for part in Path(typed_path).parts if part != "."]
    if Path(typed_path).is_absolute() or ".." in typed_parts or not typed_parts:
        return False
    return list(Path(recorded_path).parts[-len(typed_parts) :]) == typed_parts
