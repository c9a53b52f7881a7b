"""Page assembly: figures and tables into HTML strings. No file I/O (that is `reports.site`).

Every string that came from a user or a run (ids, labels, command lines, errors) goes
through `esc`; figure data is escaped by plotly's JSON encoder (`<` becomes `\\u003c`).
Links are relative, so the folder can be copied to any static host or opened from disk.
"""

from __future__ import annotations

import dataclasses
import html
import json
import shlex
from typing import Any
from urllib.parse import quote

import pandas as pd
import plotly.graph_objects as go

from harness.analysis import stats
from reports import aggregate, figures, netfigures

PLOTLY_ASSET = "assets/plotly.min.js"
STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem}
body{color:#222}table{border-collapse:collapse;font-size:.85rem;margin:1rem 0}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left}th{background:#f4f4f4}
.failed{background:#fde2e2}.skipped{background:#f0f0f0;color:#666}.scroll{overflow-x:auto}
.banner{background:#fff6d6;border:1px solid #e9d48a;padding:.5rem 1rem;border-radius:4px}
.alarm{background:#fde2e2;border:2px solid #d62728;padding:.5rem 1rem;border-radius:4px;font-weight:600}
.caption{color:#444;font-size:.9rem;margin:.2rem 0 1.5rem}.figure{margin-bottom:1rem}
nav a{margin-right:1rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.5rem}
code,pre{background:#f6f6f6;padding:.1rem .3rem;border-radius:3px;font-size:.8rem}pre{padding:.5rem;overflow-x:auto}
"""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunData:
    """One run reduced to what its page draws (no raw steps: see `reports.aggregate`)."""

    meta: dict[str, Any]
    configs: pd.DataFrame
    ranks: pd.DataFrame
    phases: pd.DataFrame
    boxes: pd.DataFrame
    series: pd.DataFrame  # downsampled slowest-rank step times, warm-up included
    recommendations: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """The sweep's recommended caps (harness.analysis.sweep), where the run swept bucket_cap_mb."""
    floor: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """Per configuration, the communication floor (harness.model.predict), where a network was measured or given."""
    predictions: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """The step-time model against the run's bucket sweeps (harness.model.predict)."""


def summarize_run(
    meta: dict[str, Any],
    configs: pd.DataFrame,
    steps: pd.DataFrame,
    ranks: pd.DataFrame,
    recommendations: pd.DataFrame | None = None,
    *,
    floor: pd.DataFrame | None = None,
    predictions: pd.DataFrame | None = None,
) -> RunData:
    series = aggregate.slowest_rank_series(steps)
    return RunData(
        recommendations=recommendations if recommendations is not None else pd.DataFrame(),
        floor=floor if floor is not None else pd.DataFrame(),
        predictions=predictions if predictions is not None else pd.DataFrame(),
        meta=meta,
        configs=aggregate.with_labels(configs),
        ranks=ranks,
        phases=aggregate.phase_medians(steps),
        boxes=aggregate.box_stats(series),
        series=aggregate.downsample(series),
    )


def esc(value: Any) -> str:
    return html.escape("" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value))


def page(title: str, body: str, *, depth: int, plots: bool = True) -> str:
    """A whole page; only pages with plots load plotly.js (4 MB of script to parse)."""
    script = f'<script src="{"../" * depth}{PLOTLY_ASSET}"></script>' if plots else ""
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style>{script}</head>\n<body>\n{body}\n</body></html>\n"
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
    return f'<div class="figure">{div}<p class="caption">{esc(caption)}</p></div>'


def world_sizes(configs: pd.DataFrame) -> list[int]:
    return sorted(int(n) for n in configs.get("world_size", pd.Series(dtype=int)).dropna().unique())


def machine_summary(meta: dict[str, Any], configs: pd.DataFrame) -> str:
    """'CPU, gloo, up to 2 ranks' or '8 × NVIDIA H100, NCCL, up to 8 ranks on 1 node'."""
    worlds = world_sizes(configs) or [c["world_size"] for c in meta.get("configurations", [])] or [0]
    most = max(worlds)
    ranks = f"up to {most} rank{'s' if most != 1 else ''}"
    if meta.get("device") == "cuda":
        environment = meta.get("environment", {})
        gpu = environment.get("gpu_name") or "GPU"
        count = environment.get("gpu_count") or ""
        nnodes = int(configs["nnodes"].max()) if "nnodes" in configs and configs["nnodes"].notna().any() else 1
        nodes = f" on {nnodes} node{'s' if nnodes != 1 else ''}"
        return f"{count} × {gpu}, {str(meta.get('backend') or 'nccl').upper()}, {ranks}{nodes}".lstrip(" ×")
    return f"CPU, {meta.get('backend') or 'gloo'}, {ranks}"


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
    ("step_ms_cv", "cv", 3),
    ("samples_per_s", "samples/s", 0),
    ("scaling_efficiency", "scaling eff.", 3),
    ("exposed_comm_ms", "exposed comm ms", 2),
    ("overlap_efficiency", "overlap eff.", 3),
    ("mem_peak_rss_mb", "peak RSS MB", 0),
    ("mem_peak_nvml_mb", "peak NVML MB", 0),
    ("parity_ok", "parity", None),
    ("parity_max_abs_diff", "parity max |Δ|", None),
    ("error", "error / reason", None),
)


def _cell(column: str, value: Any, digits: int | None) -> str:
    missing = value is None or (isinstance(value, float) and pd.isna(value))
    if column == "parity_ok":
        return {True: "ok", False: "<b>FAILED</b>"}.get(None if missing else bool(value), "not judged")
    if column == "parity_max_abs_diff" and not missing:
        return f"{value:.2e}"
    if column == "step_ms_cv" and not missing and value > figures.NOISY_CV:
        return f"<b>{value:.3f} noisy</b>"
    if digits is not None:
        return format_number(None if missing else float(value), digits)
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


def configs_table(configs: pd.DataFrame) -> str:
    ordered = configs.sort_values("config_id")
    rows = [[_cell(col, row[col], digits) for col, _, digits in TABLE_COLUMNS] for _, row in ordered.iterrows()]
    return table([esc(t) for _, t, _ in TABLE_COLUMNS], rows, row_classes=[esc(s) for s in ordered["status"]])


class FigureList:
    """Collects a page's figures with unique div ids (stable across rebuilds, so pages diff well)."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, figure: go.Figure, caption: str) -> str:
        self.count += 1
        return figure_html(figure, caption=caption, div_id=f"figure-{self.count}")


def ok_workloads(configs: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(configs.loc[configs["status"] == "ok", "workload"]))


CAPTIONS = {
    "step_time": "Shorter bars are faster: compare strategies within a world size, and each against local "
    "(no communication); whiskers span p10–p90, and a hatched bar marked PARITY FAILED trained wrongly.",
    "throughput": "Taller is better: samples per second over all ranks; at equal world size the ranking "
    "mirrors step time, across world sizes it shows what adding ranks buys.",
    "scaling": "Lines near the dashed ideal (1.0) scale well: each point is throughput at n ranks over n times "
    "the throughput at one rank, with the batch per rank fixed (weak scaling).",
    "sweep": "The lowest point of each line is the cap to use at that world size (starred); a flat line means "
    "the cap does not matter here. Whiskers span p10–p90.",
    "floor": "Each bar is a configuration's median step; its black tick is the floor max(local step, one all-reduce "
    "of all gradient bytes at the measured bus bandwidth): no data-parallel strategy can go below it, and the gap "
    "is what better overlap could still win.",
    "model": "The black line is measured; the others are `ddpbench predict`'s simulation of DDP's buckets over the "
    "run's gradient-ready profile and the measured network: dotted on the profile as measured, dashed calibrated "
    "on the run's own steps without communication (local at this world size, DDP at one rank), and with the "
    "measured compute/communication contention. The legend gives each curve's MAPE and best cap.",
    "busbw": "Higher is better: bus bandwidth (algorithm bandwidth × the nccl-tests factor) per message size; "
    "small messages are latency-bound, the plateau is what the link sustains. Red crosses: a wrong result.",
    "breakdown": "Each bar is one configuration's median step split into phases (measured steps only, all ranks); "
    "a tall sync segment is communication that backward did not hide.",
    "exposed": "Left: step time minus local's at the same world size (0 is free communication). Right: local "
    "step time / step time (1.0, dashed, means communication is completely hidden).",
    "memory": "Bars side by side are the ranks of one configuration: a taller rank 0 is a rank-0 skew. "
    "Panels without data were not measurable on this machine (null, never 0).",
    "frontier": "Lower-left is better: the strategies furthest down trade communication for memory (zero, "
    "fsdp); compare points of one colour (one world size).",
    "held": "Sizes of the tensors each rank holds after its last step: a sharded strategy's bars shrink with "
    "the world size where a replicated one's stay put. Buffers (DDP buckets, FSDP gathers) are not included.",
    "memory_cpu": "On the CPU only the process's peak RSS is measured (GPU panels are absent, not zero); "
    "bars side by side are the ranks of one configuration, so a rank-0 skew shows.",
    "distribution": "Narrow boxes are steady: quartiles of the measured slowest-rank step times, whiskers "
    "min–max; drawn from precomputed quartiles, not raw points.",
    "series": "Look for a flat line after the red crosses (warm-up steps, not counted): a slope is drift. "
    f"Series with more than {aggregate.MAX_SERIES_POINTS} measured steps show the median of each bin.",
    "noise": f"Red bars (cv above {figures.NOISY_CV:g}, dashed) are noisy: their medians differ by chance more "
    "than usual; rerun them with more steps before trusting small differences.",
}


def fastest_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=fastest>1. Which strategy is fastest here?</h2>"]
    for workload in workloads:
        parts.append(figs.add(figures.step_time_by_strategy(run.configs, workload=workload), CAPTIONS["step_time"]))
        parts.append(figs.add(figures.throughput_by_strategy(run.configs, workload=workload), CAPTIONS["throughput"]))
    return "\n".join(parts)


def scaling_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=scaling>2. How does it scale?</h2>"]
    if len(world_sizes(run.configs)) < 2:
        return parts[0] + "<p>This run has one world size only: nothing to scale.</p>"
    for workload in workloads:
        parts.append(figs.add(figures.scaling(run.configs, workload=workload), CAPTIONS["scaling"]))
    return "\n".join(parts)


def bucket_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=buckets>3. Which bucket cap?</h2>"]
    for workload in workloads:
        best = aggregate.best_caps(run.configs, workload=workload)
        for strategy, rows in best.groupby("strategy", sort=False):
            parts.append(
                figs.add(figures.bucket_cap_sweep(run.configs, workload=workload, strategy=strategy), CAPTIONS["sweep"])
            )
            picks = ", ".join(
                f"{aggregate.world_label(r.world_size)}: <b>{r.bucket_cap_mb:g} MB</b> ({r.step_ms_median:.2f} ms)"
                for r in rows.itertuples()
            )
            parts.append(f"<p>Best bucket_cap_mb for {esc(workload)} · {esc(strategy)}: {picks}.</p>")
    if not run.recommendations.empty:
        parts.append(recommendation_table(run.recommendations))
    if len(parts) == 1:
        parts.append(
            "<p>This run does not sweep <code>bucket_cap_mb</code>; <code>make sweep</code> does "
            "(<code>--bucket-cap-mb 1,5,10,25,50,100</code>).</p>"
        )
    return "\n".join(parts)


def recommendation_table(frame: pd.DataFrame) -> str:
    """The sweep's verdict: the cap to use, how sure (bootstrap 95 % CI), how flat, and the gain over 25 MB."""
    rows = []
    for r in frame.itertuples():
        gain = "" if pd.isna(r.gain_vs_default) else f"{r.gain_vs_default:+.1%}"
        as_good = ", ".join(f"{c:g}" for c in json.loads(r.equivalent_caps_mb))
        rows.append([
            esc(r.workload), esc(r.impl), esc(aggregate.world_label(int(r.world_size))),
            f"<b>{r.best_cap_mb:g} MB</b>", f"{r.best_step_ms:.2f}", f"{r.best_ci_low_ms:.2f}–{r.best_ci_high_ms:.2f}",
            esc(as_good), gain,
        ])  # fmt: skip
    head = ["workload", "strategy", "world size", "recommended cap", "median ms", "95% CI", "as good (MB)", "vs 25 MB"]
    return (
        "<h3>Recommended bucket_cap_mb</h3><p>The fastest cap; 'as good' lists the caps not significantly slower "
        "(Mann-Whitney U, p ≥ 0.002): a long list means a flat optimum.</p>" + table(head, rows)
    )


def time_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=time>4. Where does the time go?</h2>"]
    for workload in workloads:
        parts.append(
            figs.add(figures.time_breakdown(run.configs, run.phases, workload=workload), CAPTIONS["breakdown"])
        )
        parts.append(figs.add(figures.exposed_communication(run.configs, workload=workload), CAPTIONS["exposed"]))
    return "\n".join(parts)


def memory_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=memory>5. What does it cost in memory?</h2>"]
    caption = CAPTIONS["memory_cpu" if run.meta.get("device") == "cpu" else "memory"]
    for workload in workloads:
        parts.append(figs.add(figures.memory_by_rank(run.configs, run.ranks, workload=workload), caption))
        parts.append(figs.add(figures.memory_vs_time(run.configs, workload=workload), CAPTIONS["frontier"]))
        if "held_param_mb" in run.ranks and run.ranks["held_param_mb"].notna().any():
            parts.append(figs.add(figures.held_by_rank(run.configs, run.ranks, workload=workload), CAPTIONS["held"]))
    return "\n".join(parts)


def parity_table(configs: pd.DataFrame) -> str:
    ok = aggregate.labelled(configs)
    rows = [
        [
            esc(r.config_label),
            _cell("parity_ok", r.parity_ok, None),
            _cell("parity_max_abs_diff", r.parity_max_abs_diff, None),
            esc(r.parity_note),
        ]
        for r in ok.itertuples()
    ]
    classes = ["failed" if r.parity_ok is False else "" for r in ok.itertuples()]
    return table(["configuration", "parity", "max |Δ| vs reference", "note"], rows, row_classes=classes)


def trust_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=trust>6. Is every number trustworthy?</h2>"]
    for workload in workloads:
        parts.append(
            figs.add(
                figures.step_time_distribution(run.configs, run.boxes, workload=workload), CAPTIONS["distribution"]
            )
        )
        parts.append(figs.add(figures.step_time_series(run.configs, run.series, workload=workload), CAPTIONS["series"]))
        parts.append(figs.add(figures.noise(run.configs, workload=workload), CAPTIONS["noise"]))
    parts.append("<h3>Gradient parity</h3>" + parity_table(run.configs))
    return "\n".join(parts)


def environment_section(meta: dict[str, Any]) -> str:
    environment = meta.get("environment", {})
    gpus = environment.get("gpus") or []
    facts = [
        ("device, backend", f"{meta.get('device')}, {meta.get('backend')}"),
        ("threads per rank", meta.get("threads_per_rank")),
        ("host", environment.get("hostname")),
        ("CPU", f"{environment.get('cpu_model')} ({environment.get('cpu_count')} cores)"),
        (
            "GPUs",
            ", ".join(f"{g.get('index')}: {g.get('name')} ({g.get('memory_mb', 0):.0f} MB)" for g in gpus) or "none",
        ),
        (
            "driver, CUDA driver, torch CUDA, NCCL",
            ", ".join(
                str(environment.get(k)) for k in ("driver_version", "cuda_driver_version", "torch_cuda", "nccl_version")
            ),
        ),
        ("torch, python", f"{environment.get('torch_version')}, {environment.get('python')}"),
        ("platform", environment.get("platform")),
        ("git", f"{environment.get('git_sha')}{' (dirty)' if environment.get('git_dirty') else ''}"),
    ]
    parts = ["<h2 id=environment>7. On what?</h2>", table(["", ""], [[esc(k), esc(v)] for k, v in facts])]
    topology = environment.get("topology") or []
    if topology:
        rows = [
            [esc(t.get("gpu_a")), esc(t.get("gpu_b")), esc(t.get("common_ancestor")), esc(t.get("nvlink_p2p"))]
            for t in topology
        ]
        parts.append("<h3>Topology</h3>" + table(["GPU", "GPU", "nearest common ancestor", "NVLink P2P"], rows))
    command = shlex.join(str(c) for c in meta.get("command") or [])
    parts.append(f"<h3>Reproduce</h3><pre>{esc(command)}</pre>")
    full = json.dumps(environment, indent=2, default=str, sort_keys=True)
    parts.append(f"<details><summary>Full environment</summary><pre>{esc(full)}</pre></details>")
    return "\n".join(parts)


def status_section(configs: pd.DataFrame) -> str:
    """The counts, and every configuration that was not measured, with its error or reason."""
    counts = configs["status"].value_counts().to_dict() if not configs.empty else {}
    parts = ["<p>" + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("ok", "failed", "skipped")) + "</p>"]
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


def header(run: RunData) -> str:
    meta, configs = run.meta, run.configs
    parts = [
        '<nav><a href="../index.html">all runs</a><a href="#fastest">fastest</a><a href="#scaling">scaling</a>'
        '<a href="#buckets">bucket cap</a><a href="#time">time</a><a href="#model">floor &amp; model</a>'
        '<a href="#memory">memory</a>'
        '<a href="#trust">trust</a><a href="#environment">environment</a></nav>',
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
    parts.append(status_section(configs))
    return "\n".join(parts)


def model_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    """How far each strategy is from the physical limit, and whether the step-time model agrees with the sweeps."""
    parts = ["<h2 id=model>4b. How far from the floor, and does the model agree?</h2>"]
    if run.floor.empty and run.predictions.empty:
        parts.append(
            "<p>No network measurement for this run: <code>ddpbench collectives</code> on the same machine, into "
            "the same results folder (or <code>--busbw</code> to <code>ddpbench predict</code>), then "
            "<code>ddpbench report</code>, adds the communication floor and the predicted bucket-cap curves.</p>"
        )
        return "\n".join(parts)
    for workload in workloads:
        if not run.floor.empty:
            parts.append(
                figs.add(netfigures.step_vs_floor(run.configs, run.floor, workload=workload), CAPTIONS["floor"])
            )
        for world in sorted(run.predictions.loc[run.predictions["workload"] == workload, "world_size"].unique()):
            figure = netfigures.predicted_vs_measured(run.predictions, workload=workload, world_size=int(world))
            parts.append(figs.add(figure, CAPTIONS["model"]))
    if not run.predictions.empty:
        parts.append(prediction_error_table(run.predictions, run.recommendations))
    return "\n".join(parts)


# The model's variants (as harness.model.predict.VARIANTS; reports read results, never the model's code).
MODEL_VARIANTS = (
    ("predicted_raw_ms", "raw profile"),
    ("predicted_ms", "calibrated on the run's local steps"),
    ("predicted_contention_ms", "calibrated, with measured contention"),
)


def describe_error(error: dict) -> str:
    return (
        f"MAPE {error['mape']:.1%}; best cap {error['best_predicted_cap_mb']:g} MB vs measured "
        f"{error['best_measured_cap_mb']:g} MB ({error['best_cap_grid_steps']} grid step(s) apart)"
    )


def _measured_as_good(recommendations: pd.DataFrame, *, workload: str, size: str, world: int) -> list[float] | None:
    """The caps the sweep found not significantly slower than its best (harness.analysis.sweep), where it has them."""
    if recommendations.empty:
        return None
    rows = recommendations[(recommendations["impl"] == "stock") & (recommendations["workload"] == workload)
                           & (recommendations["size"] == size) & (recommendations["world_size"] == world)]  # fmt: skip
    return json.loads(rows["equivalent_caps_mb"].iloc[0]) if len(rows) == 1 else None


def prediction_error_table(predictions: pd.DataFrame, recommendations: pd.DataFrame | None = None) -> str:
    """Per sweep: each model variant's error, whether it picks the measured best cap, and whether its pick
    is among the caps the measurement cannot tell apart from the best (a flat optimum)."""
    rows = []
    for (workload, size, world), group in predictions.groupby(["workload", "size", "world_size"]):
        cells = [esc(workload), esc(size), esc(aggregate.world_label(int(world))), esc(group["network"].iloc[0])]
        as_good = _measured_as_good(recommendations if recommendations is not None else pd.DataFrame(),
                                    workload=workload, size=size, world=int(world))  # fmt: skip
        for column, _ in MODEL_VARIANTS:
            if column in group and group[column].notna().all() and len(group) > 1:
                error = stats.prediction_error(group["bucket_cap_mb"], group["measured_ms"], group[column])
                within = "" if as_good is None else (
                    "; among the measured 'as good' caps" if error["best_predicted_cap_mb"] in as_good
                    else "; not among the measured 'as good' caps")  # fmt: skip
                cells.append(esc(describe_error(error) + within))
            else:
                cells.append("not available")
        rows.append(cells)
    head = ["workload", "size", "world size", "network", *(f"model: {label}" for _, label in MODEL_VARIANTS)]
    return (
        "<h3>Model error</h3><p>Target: MAPE ≤ 10 % and the best cap within one grid step. 'As good' caps are those "
        "the sweep found not significantly slower than its best (Mann-Whitney U, p ≥ 0.002).</p>" + table(head, rows)
    )


SECTIONS = (fastest_section, scaling_section, bucket_section, time_section, model_section, memory_section,
            trust_section)  # fmt: skip


def run_page(run: RunData) -> str:
    workloads = ok_workloads(run.configs)
    figs = FigureList()
    parts = [header(run)]
    parts.extend(section(run, workloads, figs) for section in SECTIONS)
    parts.append(environment_section(run.meta))
    parts.append("<h2>Configurations</h2>" + configs_table(run.configs))
    return page(f"ddpbench run {run.meta['run_id']}", "\n".join(parts), depth=1)


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
        parts.append(figs.add(netfigures.busbw_vs_size(frame, op=op), CAPTIONS["busbw"]))
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
