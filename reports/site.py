"""Page assembly: the static site in `reports/site/`.

    index.html              every run, newest first
    runs/<run_id>.html      one page per run
    assets/plotly.min.js    plotly.js, shipped once (no CDN: the site works offline)

Every string that came from a user or a run (ids, labels, command lines, errors) goes
through `html.escape`. Links are relative, so the folder can be copied to any static host.
"""

from __future__ import annotations

import dataclasses
import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from harness import store
from reports import figures

PLOTLY_ASSET = "assets/plotly.min.js"
STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem}
body{color:#222}table{border-collapse:collapse;font-size:.85rem;margin:1rem 0}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left}th{background:#f4f4f4}
.failed{background:#fde2e2}.skipped{background:#f0f0f0;color:#666}.scroll{overflow-x:auto}
.banner{background:#fff6d6;border:1px solid #e9d48a;padding:.5rem 1rem;border-radius:4px}
.caption{color:#555;font-size:.9rem}
code,pre{background:#f6f6f6;padding:.1rem .3rem;border-radius:3px;font-size:.8rem}pre{padding:.5rem;overflow-x:auto}
"""


@dataclasses.dataclass(frozen=True)
class BuiltSite:
    index: Path
    run_pages: dict[str, Path]


def esc(value: Any) -> str:
    return html.escape("" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value))


def page(title: str, body: str, *, depth: int) -> str:
    prefix = "../" * depth
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>{esc(title)}</title><style>{STYLE}</style>"
        f'<script src="{prefix}{PLOTLY_ASSET}"></script></head>\n<body>\n{body}\n</body></html>\n'
    )


def machine_summary(meta: dict[str, Any]) -> str:
    configs = meta.get("configurations", [])
    worlds = sorted({c["world_size"] for c in configs})
    most = max(worlds) if worlds else 0
    if meta.get("device") == "cuda":
        gpu = meta.get("environment", {}).get("gpu_name") or "GPU"
        return f"{gpu}, NCCL, up to {most} rank(s)"
    return f"CPU, gloo, up to {most} rank(s)"


def figure_html(figure, *, caption: str) -> str:
    div = figure.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})
    return f'<div class="figure">{div}<p class="caption">{esc(caption)}</p></div>'


def format_number(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return esc(value)


TABLE_COLUMNS = (
    ("config_id", "configuration", None),
    ("status", "status", None),
    ("impl", "strategy", None),
    ("impl_options", "options", None),
    ("workload", "workload", None),
    ("size", "size", None),
    ("world_size", "ranks", None),
    ("batch_size", "batch/rank", None),
    ("step_ms_median", "step ms (median)", 2),
    ("step_ms_p10", "p10", 2),
    ("step_ms_p90", "p90", 2),
    ("samples_per_s", "samples/s", 0),
    ("scaling_efficiency", "scaling eff.", 3),
    ("exposed_comm_ms", "exposed comm ms", 2),
    ("mem_peak_rss_mb", "peak RSS MB", 0),
    ("mem_peak_nvml_mb", "peak NVML MB", 0),
    ("parity_ok", "parity", None),
    ("parity_max_abs_diff", "parity max |Δ|", None),
    ("error", "error", None),
)


def _cell(column: str, value: Any, digits: int | None) -> str:
    if column == "parity_ok":
        return {True: "ok", False: "<b>FAILED</b>"}.get(value, "not judged")
    if column == "parity_max_abs_diff" and value is not None and not pd.isna(value):
        return f"{value:.2e}"
    if digits is not None:
        return format_number(None if value is None else float(value), digits)
    return esc(value)


def configs_table(configs: pd.DataFrame) -> str:
    head = "".join(f"<th>{esc(title)}</th>" for _, title, _ in TABLE_COLUMNS)
    rows = []
    for _, row in configs.sort_values("config_id").iterrows():
        cells = "".join(f"<td>{_cell(col, row[col], digits)}</td>" for col, _, digits in TABLE_COLUMNS)
        rows.append(f'<tr class="{esc(row["status"])}">{cells}</tr>')
    return f"<div class=scroll><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def run_page(meta: dict[str, Any], configs: pd.DataFrame) -> str:
    run_id = meta["run_id"]
    parts = [f'<p><a href="../index.html">all runs</a></p><h1>Run {esc(run_id)}</h1>']
    if meta.get("device") == "cpu":
        parts.append(
            '<p class="banner">This run ran on the <b>CPU</b> with the gloo backend, one process per simulated '
            f"GPU ({esc(meta.get('threads_per_rank'))} thread(s) each). Its times show relative costs on this "
            "machine, not GPU performance.</p>"
        )
    parts.append(f"<p>Started {esc(meta.get('started_at'))} on {esc(machine_summary(meta))}.</p>")
    counts = configs["status"].value_counts().to_dict() if not configs.empty else {}
    parts.append("<p>" + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("ok", "failed", "skipped")) + "</p>")
    for workload in dict.fromkeys(configs.loc[configs["status"] == "ok", "workload"]):
        parts.append(
            figure_html(
                figures.step_time_by_strategy(configs, workload=workload),
                caption="Which strategy is fastest here? Shorter bars are faster; compare strategies within a "
                "world size, and each against `local` (no communication) to see the cost of communicating.",
            )
        )
    parts.append("<h2>Configurations</h2>" + configs_table(configs))
    failed = configs[configs["status"] == "failed"]
    if not failed.empty:
        items = "".join(f"<li><code>{esc(r.config_id)}</code>: {esc(r.error)}</li>" for r in failed.itertuples())
        parts.append(f"<h2>Failed configurations</h2><ul>{items}</ul>")
    command = " ".join(meta.get("command") or [])
    parts.append(f"<h2>Reproduce</h2><pre>{esc(command)}</pre>")
    environment = json.dumps(meta.get("environment", {}), indent=2, default=str)
    parts.append(f"<h2>Environment</h2><pre>{esc(environment)}</pre>")
    return page(f"ddpbench run {run_id}", "\n".join(parts), depth=1)


def index_page(runs: list[tuple[dict[str, Any], pd.DataFrame]]) -> str:
    rows = []
    for meta, configs in runs:
        run_id = meta["run_id"]
        ok = configs[configs["status"] == "ok"] if not configs.empty else configs
        cells = [
            f'<a href="runs/{esc(run_id)}.html">{esc(run_id)}</a>',
            esc(meta.get("started_at")),
            esc(machine_summary(meta)),
            esc(", ".join(sorted(set(configs.get("impl", []))))),
            esc(", ".join(sorted(set(configs.get("workload", []))))),
            esc(", ".join(str(w) for w in sorted(set(configs.get("world_size", []))))),
            f"{len(ok)}/{len(configs)} ok",
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(
        f"<th>{t}</th>"
        for t in ("run", "started", "machine", "strategies", "workloads", "world sizes", "configurations")
    )
    body = (
        "<h1>ddpbench runs</h1><p>Newest first. Each run page answers which strategy is fastest, how it scales "
        "and what it costs.</p>"
        + (
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            if rows
            else "<p>No runs yet: <code>make bench</code>.</p>"
        )
    )
    return page("ddpbench runs", body, depth=0)


def write_plotly_asset(out: Path) -> None:
    from plotly.offline import get_plotlyjs

    target = out / PLOTLY_ASSET
    if not target.exists():
        store.atomic_write(target, lambda tmp: tmp.write_text(get_plotlyjs(), encoding="utf-8"))


def build_site(*, results: Path, out: Path) -> BuiltSite:
    out = Path(out)
    write_plotly_asset(out)
    runs = []
    pages: dict[str, Path] = {}
    for run in store.list_runs(results):
        meta = store.read_json(run / "run.json")
        configs = store.read_configs(run)
        runs.append((meta, configs))
        path = out / "runs" / f"{meta['run_id']}.html"
        text = run_page(meta, configs)
        store.atomic_write(path, lambda tmp, text=text: tmp.write_text(text, encoding="utf-8"))
        pages[meta["run_id"]] = path
    index = out / "index.html"
    text = index_page(runs)
    store.atomic_write(index, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return BuiltSite(index=index, run_pages=pages)
