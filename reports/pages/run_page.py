"""The run page: its header and status, a section per question (`reports.pages.run_sections`), the
environment it ran on, and every configuration in one table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from reports.aggregate import RunData, machine_summary, precision
from reports.pages import alerts, answer, profiles
from reports.pages.html import FigureList, esc, facts_table, name_html, page, reproduce_html, table
from reports.pages.run_sections import (
    bucket_section,
    config_cell,
    fastest_section,
    memory_section,
    model_section,
    scaling_section,
    time_section,
    trust_section,
)

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
    ("step_ms_cv", "cv", 3),
    ("samples_per_s", "samples/s", 0),
    ("scaling_efficiency", "scaling eff.", 3),
    ("exposed_comm_ms", "exposed comm ms", 2),
    ("overlap_efficiency", "overlap eff.", 3),
    ("mem_peak_rss_mb", "peak RSS MiB", 0),
    ("mem_peak_nvml_mb", "peak NVML MiB", 0),
    ("parity_ok", "parity", None),
    ("parity_max_abs_diff", "parity max |Δ|", None),
    ("error", "error / reason", None),
)


def configs_table(configs: pd.DataFrame) -> str:
    ordered = configs.sort_values("config_id")
    rows = [[config_cell(col, row[col], digits) for col, _, digits in TABLE_COLUMNS] for _, row in ordered.iterrows()]
    return table([esc(t) for _, t, _ in TABLE_COLUMNS], rows, row_classes=[esc(s) for s in ordered["status"]])


def ok_workloads(configs: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(configs.loc[configs["status"] == "ok", "workload"]))


def _whatif_link(meta: dict) -> str:
    if not meta.get("whatif"):
        return ""
    return f'<a href="{esc(meta["whatif"])}">what if on {esc(meta.get("whatif_cluster"))}</a>'


def header(run: RunData) -> str:
    meta, configs = run.meta, run.configs
    parts = [
        '<nav><a href="../index.html">all runs</a><a href="#answer">answer</a><a href="#fastest">fastest</a>'
        '<a href="#scaling">scaling</a><a href="#buckets">bucket cap</a><a href="#time">time</a>'
        '<a href="#model">floor &amp; model</a><a href="#memory">memory</a><a href="#trust">trust</a>'
        + ('<a href="#profiles">profiles</a>' if not profiles.profiled(configs).empty else "")
        + _whatif_link(meta)
        + '<a href="#environment">environment</a></nav>',
        f"<h1>Run {esc(meta['run_id'])}</h1>",
    ]
    if meta.get("device") == "cpu":
        parts.append(
            '<p class="banner">This run ran on the <b>CPU</b> with the gloo backend, one process per simulated '
            f"GPU ({esc(meta.get('threads_per_rank'))} thread(s) each). Its times show relative costs on this "
            "machine, not GPU performance.</p>"
        )
    failed_parity = configs[configs["parity_ok"] == False]  # noqa: E712 (None means not judged)
    if not failed_parity.empty:
        names = ", ".join(esc(c) for c in failed_parity["config_id"])
        parts.append(f'<p class="alarm">PARITY FAILED: {names} did not train like one process on the whole batch.</p>')
    parts.append(f"<p>Started {esc(meta.get('started_at'))} on {esc(machine_summary(meta, configs))}.</p>")
    parts.append(status_section(meta, configs))
    resume = f"{RESUME_COMMAND} --resume {meta['run_id']} --results {Path(run.run_path).parent}"
    parts.append(alerts.alerts(meta, configs, resume_command=resume))
    parts.extend(f'<p class="banner warning">{s}</p>' for s in profiles.profile_alert(configs))
    return "\n".join(parts)


def status_section(meta: dict[str, Any], configs: pd.DataFrame) -> str:
    """The counts (skipped and never run apart from failed), and every configuration that was not
    measured, with its error or reason."""
    counts = alerts.status_counts(meta, configs)
    shown = [f"{n} {status}" for status, n in counts.items() if n or status != "not run"]
    parts = ["<p>" + ", ".join(shown) + "</p>"]
    for status, title in (("failed", "Failed configurations"), ("skipped", "Skipped configurations")):
        rows = configs[configs["status"] == status].sort_values("config_id")
        if not rows.empty:
            items = "".join(
                f"<li><code>{esc(r.config_id)}</code>{_failure_kind(r)}: {esc(r.error)}</li>" for r in rows.itertuples()
            )
            parts.append(f'<h3>{title}</h3><ul class="{status}">{items}</ul>')
    return "\n".join(parts)


def _failure_kind(row) -> str:
    """(oom), (timeout), …: the class of a failure, where the run recorded one."""
    kind = getattr(row, "error_kind", None)
    return f" <b>({esc(kind)})</b>" if isinstance(kind, str) and row.status == "failed" else ""


def _known(*values: Any) -> list[str]:
    return [str(v) for v in values if v is not None and v != ""]


GPU_SOFTWARE = {
    "driver_version": "driver",
    "cuda_driver_version": "CUDA driver",
    "torch_cuda": "torch CUDA",
    "nccl_version": "NCCL",
}
"""Each named beside its value: a run on the CPU knows torch's CUDA build and nothing else of the four."""


def environment_facts(meta: dict[str, Any], configs: pd.DataFrame | None = None) -> list[tuple[str, str]]:
    """What the run measured on, each fact once, and what it computed in (its rows' dtype and TF32: the run's
    --dtype may be 'auto'); unknown parts are left out, never shown as None."""
    environment = meta.get("environment", {})
    gpus = environment.get("gpus") or []
    cpu = environment.get("cpu_model")
    cores = environment.get("cpu_count")
    facts = [
        ("device, backend", ", ".join(_known(meta.get("device"), meta.get("backend")))),
        ("precision", precision(configs) if configs is not None else ""),
        ("threads per rank", ", ".join(_known(meta.get("threads_per_rank")))),
        ("host", ", ".join(_known(environment.get("hostname")))),
        ("CPU", " ".join(_known(cpu, f"({cores} cores)" if cores else None))),
        ("GPUs", ", ".join(f"{g.get('index')}: {g.get('name')}{gib_suffix(g.get('memory_mb'))}" for g in gpus)
                 or ("none" if meta.get("device") == "cpu" else "")),
        ("GPU software", ", ".join(f"{name} {environment[key]}" for key, name in GPU_SOFTWARE.items()
                                   if _known(environment.get(key)))),
        ("torch, python", ", ".join(_known(environment.get("torch_version"), environment.get("python")))),
        ("platform", ", ".join(_known(environment.get("platform")))),
        ("git", " ".join(_known(environment.get("git_sha"), "(dirty)" if environment.get("git_dirty") else None))),
    ]  # fmt: skip
    return [(name, text) for name, text in facts if text]


def gib_suffix(mib: Any) -> str:
    return f" ({float(mib) / 1024:.1f} GiB)" if isinstance(mib, (int, float)) and mib else ""


def environment_section(meta: dict[str, Any], configs: pd.DataFrame | None = None) -> str:
    environment = meta.get("environment", {})
    parts = ["<h2 id=environment>7. On what?</h2>", facts_table(environment_facts(meta, configs))]
    topology = environment.get("topology") or []
    if topology:
        rows = [
            [esc(t.get("gpu_a")), esc(t.get("gpu_b")), esc(t.get("common_ancestor")), esc(t.get("nvlink_p2p"))]
            for t in topology
        ]
        parts.append("<h3>Topology</h3>" + table(["GPU", "GPU", "nearest common ancestor", "NVLink P2P"], rows))
    parts.append(reproduce_html(meta.get("command"), meta.get("workloads")))
    full = json.dumps(environment, indent=2, default=str, sort_keys=True)
    parts.append(f"<details><summary>Full environment</summary><pre>{esc(full)}</pre></details>")
    return "\n".join(parts)


def workloads_section(meta: dict[str, Any]) -> str:
    """Which code each workload ran: its spec and kind, the file that defines it and a hash of its content
    (run.json's `workloads`; runs made before it have none)."""
    recorded = meta.get("workloads") or {}
    if not recorded:
        return ""
    rows = [[name_html(name), esc(w.get("kind")), name_html(w.get("path") or w.get("spec"), 80),
             esc((w.get("sha256") or "")[:16]), esc(json.dumps(w.get("options") or {}, sort_keys=True))]
            for name, w in recorded.items()]  # fmt: skip
    return "<h3>Workloads: the code that ran</h3>" + table(["workload", "kind", "file or spec", "sha256", "options"],
                                                            rows)  # fmt: skip


RESUME_COMMAND = ".venv/bin/ddpbench bench"  # as `make setup` installs it (README)

SECTIONS = (fastest_section, scaling_section, bucket_section, time_section, model_section, memory_section,
            trust_section)  # fmt: skip


def run_page(run: RunData) -> str:
    workloads = ok_workloads(run.configs)
    figs = FigureList()
    parts = [header(run), answer.answer_section(run, workloads)]
    parts.extend(section(run, workloads, figs) for section in SECTIONS)
    parts.append(profiles.profiles_section(run.configs, run.traces, run_href=run.run_href, run_path=run.run_path))
    parts.append(workloads_section(run.meta))
    parts.append(environment_section(run.meta, run.configs))
    parts.append("<h2>Configurations</h2>" + configs_table(run.configs))
    return page(f"ddpbench run {run.meta['run_id']}", "\n".join(parts), depth=1)
