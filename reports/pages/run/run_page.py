"""The run page: its header and status, a section per question (`reports.pages.run.run_sections`), the
environment it ran on, every configuration in one table, and the profiles: for each configuration measured
with `--profile`, its trace files (one per rank), how to open them, and the warning that its times were
measured under the profiler."""

from __future__ import annotations

import json
import shlex
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import pandas as pd

from harness.analysis import roles, stats
from harness.analysis.verdicts import compare as comparing
from harness.analysis.verdicts.environment import fault_share, fault_words, kept_fault
from harness.results import contention, invocation, layout, store
from harness.results.invocation import as_typed, resume_command
from harness.results.values import batch_words, counted, failed_parity_words, strategy_labels
from reports import aggregate
from reports.aggregate import RunData, hosts_text, machine_summary, precision, usable_cores
from reports.pages import alerts, answer
from reports.pages.html import FigureList, esc, facts_table, format_number, name_html, page, reproduce_html, table
from reports.pages.run import takeaways
from reports.pages.run.model_section import model_section
from reports.pages.run.run_sections import (
    bucket_section,
    config_cell,
    fastest_section,
    memory_section,
    scaling_section,
    takeaway,
    time_section,
)
from reports.pages.run.trust_section import trust_section

TABLE_COLUMNS = (
    ("config_id", "configuration", None),
    ("status", "status", None),
    ("impl", "strategy", None),
    ("impl_options", "options", None),
    ("workload", "workload", None),
    ("size", "size", None),
    ("world_size", "ranks", None),
    ("batch", "batch/rank", None),  # values.batch_words: K and the global batch where K is not 1
    ("step_ms_median", "step ms (median)", 2),
    ("step_ms_p10", "p10", 2),
    ("step_ms_p90", "p90", 2),
    ("step_ms_cv", "cv", 3),
    ("samples_per_s", "samples/s (median step)", None),  # samples_text, as the console says it
    ("scaling_efficiency", "scaling eff. (own 1 rank)", 3),  # each named for its base: the sentence leads with
    ("scaling_efficiency_vs_local", "scaling eff. (local at 1 rank)", 3),  # local's, a reader took one for the other
    ("exposed_comm_ms", "exposed comm ms", 2),
    ("overlap_efficiency", "overlap eff.", 3),
    ("mem_peak_rss_mb", "peak RSS MiB", 0),
    ("mem_peak_nvml_mb", "peak NVML MiB", 0),
    ("parity_ok", "parity", None),
    ("parity_max_abs_diff", "parity max |Δ|", None),
    ("error", "error / reason", None),
)


def configs_table(configs: pd.DataFrame) -> str:
    ordered = configs.sort_values("config_id").assign(batch=lambda f: [batch_words(r) for r in f.to_dict("records")])
    rows = [[config_cell(col, row[col], digits) for col, _, digits in TABLE_COLUMNS] for _, row in ordered.iterrows()]
    return table([esc(t) for _, t, _ in TABLE_COLUMNS], rows, row_classes=[esc(s) for s in ordered["status"]])


def ok_workloads(configs: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(configs.loc[configs["status"] == "ok", "workload"]))


def _whatif_link(meta: dict) -> str:
    if not meta.get("whatif"):
        return ""
    return f'<a href="{esc(meta["whatif"])}">what if on {esc(meta.get("whatif_cluster"))}</a>'


def _comparison_links(comparisons: list[dict]) -> str:
    """The `ddpbench compare` pages in the site that this run takes part in (site.read_comparisons), BASE → NEW."""
    links = [f'<a href="../{esc(c["href"])}">{esc(comparing.comparison_name(c["base"], c["new"]))}</a> '
             f"({esc(c.get('outcome') or 'no outcome recorded')})" for c in comparisons]  # fmt: skip
    return f"<p>Compared (BASE → NEW): {', '.join(links)}.</p>" if links else ""


def fault_alarm(meta: dict) -> str:
    fault = kept_fault(meta)  # '' where a retry without it measured again every row it was set for
    share = f" ({fault_share(meta)})" if fault_share(meta) else ""
    return (
        f'<p class="alarm">FAULT INJECTED on purpose{esc(share)}: {esc(fault_words(fault, rows=bool(share)))}.</p>'
        if fault
        else ""
    )


def header(run: RunData) -> str:
    meta, configs = run.meta, run.configs
    parts = [
        '<nav><a href="../index.html">all runs</a><a href="#answer">answer</a><a href="#fastest">fastest</a>'
        '<a href="#scaling">scaling</a><a href="#buckets">bucket cap</a><a href="#time">time</a>'
        '<a href="#model">floor &amp; model</a>'
        + ('<a href="#gpu">GPU work</a>' if _gpu_work_columns(configs) else "")
        + '<a href="#memory">memory</a><a href="#trust">trust</a>'
        + ('<a href="#profiles">profiles</a>' if not profiled(configs).empty else "")
        + _whatif_link(meta)
        + '<a href="#environment">environment</a></nav>',
        f"<h1>Run {esc(meta['run_id'])}</h1>",
        _comparison_links(meta.get("comparisons") or []),
    ]
    if meta.get("device") == "cpu":
        parts.append(
            '<p class="banner">This run ran on the <b>CPU</b> with the gloo backend, one process per simulated '
            f"GPU{esc(aggregate.threads_each(meta))}. Its times show relative costs on this "
            "machine, not GPU performance.</p>"
        )
    parts.append(fault_alarm(meta))  # a variable left set in CI: verdicts made up on purpose, never unmarked
    failed_parity = configs[configs["parity_ok"] == False]  # noqa: E712 (None means not judged)
    if not failed_parity.empty:
        names = ", ".join(esc(f"{row['config_id']} ({failed_parity_words(row)})".removesuffix(" ()"))
                          for row in failed_parity.to_dict("records"))  # fmt: skip
        parts.append(f'<p class="alarm">PARITY FAILED: {names} did not train like one process on the whole batch.</p>')
    parts.append(f"<p>Started {esc(meta.get('started_at'))} on {esc(machine_summary(meta, configs))}"
                 f"{sessions_words(*sessions_of(meta, run.run_path))}.</p>")  # fmt: skip
    parts.append(status_section(meta, configs, listed=("failed",)))  # the skipped listed below the answer
    # named as the README names it: the page is read later, maybe elsewhere, where the path that ran it means nothing
    resume = resume_command(meta.get("page") or meta["run_id"], Path(run.run_path).parent, program=invocation.NAME)
    launches = contention.read(run.run_path) if run.run_path else None
    parts.append(alerts.alerts(meta, configs, resume_command=resume, launches=launches))
    parts.extend(alerts.folded(s) for s in profile_alert(configs))
    return "\n".join(parts)


def sessions_of(meta: dict[str, Any], run_path: str | Path | None) -> tuple[int, list[dict]]:
    """How many sessions made the run, and what each ran where run.json records it (`sessions`, which `bench
    --resume` adds to); a run resumed before that record has only summary.json's count."""
    recorded = meta.get("sessions") or []
    if recorded:
        return len(recorded), recorded
    if not run_path:  # a page drawn from data alone (a test's): no folder to read a count from
        return 1, []
    try:
        count = int(store.read_json(Path(run_path) / layout.SUMMARY_JSON).get("sessions") or 1)
    except (OSError, ValueError, TypeError, AttributeError):  # no summary (a run cut short), or not one's shape
        count = 1
    return count, []


def sessions_words(count: int, recorded: list[dict]) -> str:
    """'; made over 3 sessions: after the first, `ddpbench bench --resume …` (when), …', or '' for one session:
    a run finished with --resume is not what its first command made."""
    if count < 2:
        return ""
    later = [f"<code>{esc(shlex.join(as_typed([str(w) for w in s.get('command') or []])))}</code> "
             f"({esc(s.get('started_at'))})" for s in recorded[1:]]  # fmt: skip
    how = f": after the first, {'; '.join(later)}" if later else " (the later ones with bench --resume, not recorded)"
    return f"; made over {count} sessions{how}"


def status_section(meta: dict[str, Any], configs: pd.DataFrame, *, listed=("failed", "skipped"), counted=True) -> str:
    """The counts (skipped and never run apart from failed) where `counted`, and every configuration of the `listed`
    statuses that was not measured, with its error or reason."""
    counts = alerts.status_counts(meta, configs)
    shown = [f"{n} {status}" for status, n in counts.items() if n or status != "not run"]
    parts = ["<p>" + ", ".join(shown) + "</p>"] if counted else []
    for status, title in (("failed", "Failed configurations"), ("skipped", "Skipped configurations")):
        if status not in listed:
            continue
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
    cores, usable = environment.get("cpu_count"), usable_cores(environment)
    usable_said = f", {usable} usable" if usable != cores else ""  # a taskset's or a container's share
    facts = [
        ("device, backend", ", ".join(_known(meta.get("device"), meta.get("backend")))),
        ("precision", precision(configs) if configs is not None else ""),
        ("threads per rank", ", ".join(_known(meta.get("threads_per_rank")))),
        ("host", hosts_text(meta)),
        ("CPU", " ".join(_known(cpu, f"({cores} cores{usable_said})" if cores else None))),
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


def environment_section(
    meta: dict[str, Any], configs: pd.DataFrame | None = None, *, sessions: int = 1, launches: list | None = None
) -> str:
    """`launches`: the run's contention records (None: not recorded, as for a run from before them)."""
    environment = meta.get("environment", {})
    facts = [*environment_facts(meta, configs), ("beside the run", contention.in_words(launches))]
    parts = ["<h2 id=environment>7. On what?</h2>", facts_table(facts)]
    topology = environment.get("topology") or []
    if topology:
        rows = [
            [esc(t.get("gpu_a")), esc(t.get("gpu_b")), esc(t.get("common_ancestor")), esc(t.get("nvlink_p2p"))]
            for t in topology
        ]
        parts.append("<h3>Topology</h3>" + table(["GPU", "GPU", "nearest common ancestor", "NVLink P2P"], rows))
    parts.append(reproduce_html(meta.get("command"), meta.get("workloads")))
    if sessions > 1:  # the command started the run; --resume made the rest (the top of the page names them)
        parts.append(f"<p>That command made the first of this run's {sessions} sessions; the others went on with "
                     "<code>bench --resume</code>, as the top of the page says. Run again, it is one session: where "
                     "a --budget stopped one, it may stop elsewhere, with other verdicts open.</p>")  # fmt: skip
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


GPU_WORK = (
    ("step_ms_median", "step ms", 2),
    ("achieved_tflops", "TFLOP/s", 1),
    ("mfu", "MFU %", 1),  # a fraction, shown ×100 (the sentence above the table says "13.4% MFU")
    ("gpu_util_mean_pct", "kernel busy %", 0),
    ("sm_clock_mean_mhz", "SM clock MHz", 0),
    ("power_mean_w", "power W", 0),
    ("power_peak_w", "peak W", 0),
)
"""The GPU section's columns: what the measured steps did with the GPU (the NVML ones are sampled over them)."""
GPU_WORK_CAPTION = (
    "Each configuration over its measured steps: its step, the geometric mean of its repeats' medians as the "
    "answer's; the rest, the median over its repeats. TFLOP/s: the model's forward and "
    "backward FLOPs per sample (counted by FlopCounterMode) × samples per second; MFU: that over the dense peak "
    "of the GPUs used at the run's precision (NVIDIA's datasheets; empty where the GPU's peak is not known); "
    "kernel busy: NVML's utilisation, the share of time some kernel ran, not how many SMs it kept busy; SM "
    "clock and board power: NVML's mean (and power's peak) over the steps."
)


def gpu_work_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    """How hard each configuration kept its GPUs working, on runs whose ranks recorded it (NVML, a known peak);
    "" on the CPU. Why a step costs what it does on the GPU: MFU far below the peak with the baseline's own
    at the same level is the model's (kernels, launches), not data parallelism's."""
    shown = _gpu_work_columns(run.configs)
    if not shown:
        return ""
    parts = ["<h2 id=gpu>4c. How hard did the GPUs work?</h2>", f"<p>{esc(GPU_WORK_CAPTION)}</p>"]
    for workload in workloads:
        rows = gpu_work_rows(run.configs, workload=workload)
        if rows.empty:
            continue
        parts.append(takeaway(workload, takeaways.gpu_work(rows)))
        columns = [GPU_WORK[0], *shown]
        shown_rows = rows.assign(mfu=rows["mfu"] * 100) if "mfu" in rows else rows
        cells = [[esc(r["configuration"]), *(format_number(r[c], digits) for c, _, digits in columns)]
                 for _, r in shown_rows.iterrows()]  # fmt: skip
        parts.append(table(["configuration", *(esc(title) for _, title, _ in columns)], cells))
    return "\n".join(parts)


def _gpu_work_columns(configs: pd.DataFrame) -> list[tuple[str, str, int]]:
    """The columns recorded, on runs of GPUs: a CPU run's FLOP rate is no GPU's ceiling (it read 0.0 TFLOP/s)."""
    if "device" in configs and not configs["device"].eq("cuda").any():
        return []
    return [c for c in GPU_WORK[1:] if c[0] in configs and configs[c[0]].notna().any()]


def gpu_work_rows(configs: pd.DataFrame, *, workload: str) -> pd.DataFrame:
    """One row per configuration of `workload` (its ok repeats pooled: the step by the geometric mean of their
    medians, as the answer pools it; the rest by median), labelled 'stock · w2', with `baseline` (the
    no-communication floor) and the GPU_WORK columns it has."""
    rows = aggregate.labelled(configs, workload=workload)
    columns = [c for c, _, _ in GPU_WORK if c in rows]
    if rows.empty or not columns:
        return pd.DataFrame()
    keys = [key for key in aggregate.SAME_CONFIGURATION if key in rows]
    groups = rows.groupby(keys, dropna=False, sort=False)
    pooled = groups[columns].median().reset_index()
    if "step_ms_median" in columns:
        pooled["step_ms_median"] = groups["step_ms_median"].agg(stats.geometric_mean).to_numpy()
    labels = strategy_labels(pooled)
    pooled["configuration"] = [f"{label} · w{int(w)}" for label, w in zip(labels, pooled["world_size"], strict=True)]
    return pooled.assign(baseline=roles.is_baseline(pooled).to_numpy())


SECTIONS = (fastest_section, scaling_section, bucket_section, time_section, model_section, gpu_work_section,
            memory_section, trust_section)  # fmt: skip


def run_page(run: RunData) -> str:
    workloads = ok_workloads(run.configs)
    figs = FigureList()
    skipped = status_section(run.meta, run.configs, listed=("skipped",), counted=False)  # below the answer
    parts = [header(run), answer.answer_section(run, workloads), skipped]
    parts.extend(section(run, workloads, figs) for section in SECTIONS)
    parts.append(profiles_section(run.configs, run.traces, run_href=run.run_href, run_path=run.run_path))
    parts.append(workloads_section(run.meta))
    parts.append(environment_section(run.meta, run.configs, sessions=sessions_of(run.meta, run.run_path)[0],
                                     launches=contention.read(run.run_path) if run.run_path else None))  # fmt: skip
    parts.append("<h2>Configurations</h2>" + configs_table(run.configs))
    return page(f"ddpbench run {run.meta['run_id']}", "\n".join(parts), depth=1)


# ---- the profiles

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
        f"<b>Profiled:</b> {counted(len(rows), 'configuration')} ran under torch.profiler "
        '(<a href="#profiles">traces</a>); '
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
