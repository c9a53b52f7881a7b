"""Pure reductions of the raw tables into what the figures draw: DataFrames in, DataFrames out.

A results folder can hold millions of step rows. Every reduction here is one vectorised
group-by, so that the pages never carry raw samples: the step-time series is downsampled to a
fixed number of points per configuration and the distributions are drawn from precomputed
quartiles (reports/step_series.py reduces the steps).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import optimizer_lead, stats, why
from harness.analysis.verdicts import sweep
from harness.results.values import counted, strategy_labels
from reports.step_series import box_stats, downsample, phase_means, slowest_rank_series


def world_label(world_size: int) -> str:
    return counted(world_size, "rank")


def threads_each(meta: dict) -> str:
    """'(2 threads each)': a CPU run's threads a rank, as its run.json records them; '' where it records none (the
    banners once said 'None thread(s) each')."""
    threads = meta.get("threads_per_rank")
    return f" ({counted(int(threads), 'thread')} each)" if threads else ""


def usable_cores(environment: dict) -> int | None:
    """The cores a run's ranks could run on (run.json's usable_cpus: a taskset's or a container's share), or the
    machine's where a run from before recorded only those (nightB ran under `taskset -c 0` and said 2)."""
    return environment.get("usable_cpus") or environment.get("cpu_count")


def labelled(configs: pd.DataFrame, *, workload: str | None = None, status: str | None = "ok") -> pd.DataFrame:
    """Configurations of one workload with `label` (strategy) and `config_label` (strategy · world)."""
    rows = configs
    if workload is not None:
        rows = rows[rows["workload"] == workload]
    if status is not None:
        rows = rows[rows["status"] == status]
    if "config_label" not in rows:
        rows = with_labels(rows)
    # Caps in numeric order (1, 5, 25), not the labels' alphabetical one (1, 25, 5).
    keys = [key for key in ("world_size", "impl", "bucket_cap_mb", "label") if key in rows]
    return rows.sort_values(keys, kind="stable")


SAME_CONFIGURATION = why.SAME_CONFIGURATION
"""What makes two rows repeats of one configuration (everything but the repeat)."""


def has_repeats(configs: pd.DataFrame) -> bool:
    """Whether some configuration was measured more than once (several ok repeats: what figures draw)."""
    keys = [key for key in SAME_CONFIGURATION if key in configs]
    ok = configs[configs["status"] == "ok"] if "status" in configs else configs
    return bool(keys) and bool(ok.duplicated(subset=keys).any())


def typical_repeats(configs: pd.DataFrame, *, by: str = "step_ms_median", highest: bool = False) -> pd.DataFrame:
    """The ok configurations with a step time, one row each: of its repeats, the one whose median step is the
    median of theirs (the lower middle of an even count), so that a figure of one bar, box or row per
    configuration draws a measured launch for each, not one per repeat (`--repeats auto` makes up to 20);
    `highest`: the one with the highest `by` (a memory peak: the one to plan for). Without repeats, the
    configs as they are (figures pick the ok rows themselves)."""
    if not has_repeats(configs):
        return configs
    keys = [key for key in SAME_CONFIGURATION if key in configs]
    timed = configs[(configs["status"] == "ok") & configs["step_ms_median"].notna()]
    ranked = timed.sort_values([by, "repeat"], kind="stable", na_position="first")
    middle = (lambda n: n - 1) if highest else (lambda n: (n - 1) // 2)
    picked = [group.index[middle(len(group))] for _, group in ranked.groupby(keys, dropna=False, sort=False)]
    chosen = configs.loc[sorted(picked)]
    return with_labels(chosen) if "label" in configs else chosen  # labels without the '#k' of a repeat


def over_repeats(shown: pd.DataFrame, configs: pd.DataFrame, column: str) -> pd.DataFrame:
    """`shown` (typical_repeats) with `column` replaced by its median over each configuration's ok repeats."""
    keys = [key for key in SAME_CONFIGURATION if key in configs]
    ok = configs[configs["status"] == "ok"]
    medians = ok.groupby(keys, dropna=False, sort=False)[column].median().rename(f"{column}_over")
    merged = shown.merge(medians.reset_index(), on=keys, how="left")
    return merged.assign(**{column: merged.pop(f"{column}_over")}).set_index(shown.index)


def communication_over_repeats(shown: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """`shown` (typical_repeats) with `comm_ms` and `exposed_comm_ms` the means of each configuration's timed ok
    repeats and `overlap_efficiency` 1 − Σ not hidden / Σ in flight over them: the answer's and §4's sentence's figures
    (a chart of the median repeat drew 45 % hidden under a sentence of 54 %, pooled)."""
    keys = [key for key in SAME_CONFIGURATION if key in configs]
    timed = configs[(configs["status"] == "ok") & configs["comm_ms"].notna() & configs["exposed_comm_ms"].notna()]
    means = timed.groupby(keys, dropna=False, sort=False)[["comm_ms", "exposed_comm_ms"]].mean().add_suffix("_over")
    share = (1.0 - means["exposed_comm_ms_over"] / means["comm_ms_over"]).clip(0.0, 1.0)  # overlap.overlap_efficiency's
    means["overlap_efficiency_over"] = share.where(means["comm_ms_over"] > 0)
    merged = shown.merge(means.reset_index(), on=keys, how="left")
    pooled = {column: merged.pop(f"{column}_over") for column in ("comm_ms", "exposed_comm_ms", "overlap_efficiency")}
    return merged.assign(**pooled).set_index(shown.index)


def geometric_over_repeats(shown: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """`shown` (typical_repeats) with `step_ms_median` the geometric mean of each configuration's ok repeats' medians
    (as the answer pools them), `repeat_low_ms` and `repeat_high_ms` the lowest and highest of them."""
    keys = [key for key in SAME_CONFIGURATION if key in configs]
    ok = configs[(configs["status"] == "ok") & configs["step_ms_median"].notna()]
    medians = ok.groupby(keys, dropna=False, sort=False)["step_ms_median"]
    pooled = pd.DataFrame({"pooled_ms": medians.agg(lambda ms: float(np.exp(np.log(ms.astype(float)).mean()))),
                           "repeat_low_ms": medians.min(), "repeat_high_ms": medians.max()})  # fmt: skip
    merged = shown.drop(columns=["repeat_low_ms", "repeat_high_ms"], errors="ignore").merge(
        pooled.reset_index(), on=keys, how="left")  # fmt: skip
    return merged.assign(step_ms_median=merged.pop("pooled_ms")).set_index(shown.index)


def with_labels(configs: pd.DataFrame) -> pd.DataFrame:
    """The configs with their labels, computed once per run (a page asks for them many times)."""
    rows = configs.copy()
    rows["label"] = strategy_labels(rows)
    if "repeat" in rows and has_repeats(rows):
        # --repeats: each measurement is drawn apart (never stacked on the same bar) until repeats are pooled.
        rows["label"] = [
            f"{label} #{int(r) + 1}" for label, r in zip(rows["label"], rows["repeat"].fillna(0), strict=True)
        ]
    rows["config_label"] = [f"{label} · w{w}" for label, w in zip(rows["label"], rows["world_size"], strict=True)]
    return rows


def best_caps(configs: pd.DataFrame, *, workload: str) -> pd.DataFrame:
    """For each strategy with several bucket caps, the fastest cap per world size, by each cap's
    centre over its repeats (sweep_centres: the centre the sweep's verdict uses)."""
    centres = sweep_centres(configs, workload=workload)
    columns = ["strategy", "world_size", "bucket_cap_mb", "step_ms"]
    if centres.empty:
        return pd.DataFrame(columns=columns)
    best = centres.loc[centres.groupby(["strategy", "world_size"])["step_ms"].idxmin()]
    return best[columns].reset_index(drop=True)


def sweep_centres(configs: pd.DataFrame, *, workload: str) -> pd.DataFrame:
    """Per swept strategy, world size and cap, its repeats pooled: `step_ms` the geometric mean of the
    repeats' medians and `low_ms`–`high_ms` its 95 % interval (stats.center_interval; NaN with one
    repeat), `repeats` how many."""
    rows = sweep_rows(configs, workload=workload).dropna(subset=["step_ms_median"])
    pooled = []
    for (strategy, world, cap), group in rows.groupby(["strategy", "world_size", "bucket_cap_mb"], sort=True):
        centre, low, high = stats.center_interval(group["step_ms_median"].astype(float).tolist())
        pooled.append({"strategy": strategy, "world_size": int(world), "bucket_cap_mb": float(cap),
                       "step_ms": centre, "low_ms": low, "high_ms": high, "repeats": len(group)})  # fmt: skip
    columns = ["strategy", "world_size", "bucket_cap_mb", "step_ms", "low_ms", "high_ms", "repeats"]
    return pd.DataFrame(pooled, columns=columns)


def sweep_rows(configs: pd.DataFrame, *, workload: str) -> pd.DataFrame:
    """The ok configurations of strategies that sweep bucket_cap_mb, with their strategy (cap left out)."""
    rows = labelled(configs, workload=workload).dropna(subset=["bucket_cap_mb"])
    rows["bucket_cap_mb"] = sweep.swept_cap(rows)  # 0.05 as given, not DDP's whole bytes
    rows["strategy"] = strategy_labels(rows, without=("bucket_cap_mb",))
    swept = rows.groupby("strategy")["bucket_cap_mb"].transform("nunique") > 1
    return rows[swept].sort_values(["strategy", "world_size", "bucket_cap_mb"])


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunData:
    """One run reduced to what its page draws (no raw steps: the reductions above)."""

    meta: dict[str, Any]
    configs: pd.DataFrame
    ranks: pd.DataFrame
    phases: pd.DataFrame  # per configuration, the slowest rank's mean segments (phase_means)
    boxes: pd.DataFrame
    series: pd.DataFrame  # downsampled slowest-rank step times, warm-up included
    recommendations: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """The sweep's recommended caps (harness.analysis.verdicts.sweep), where the run swept bucket_cap_mb."""
    floor: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """Per configuration, the communication floor (harness.perfmodel.predict), where a network was measured or given."""
    predictions: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """The step-time model against the run's bucket sweeps (harness.perfmodel.predict)."""
    timeline: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """Per configuration with timed collectives, every rank in rank 0's typical step (typical_step_timeline)."""
    gradprofiles: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """The run's gradient-ready profiles, a row per parameter (what each bucket of the timeline holds)."""
    decisions: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """Under --repeats auto, each verdict and the look it was decided at (harness.analysis.verdicts.history)."""
    traces: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """Per profiled configuration, its trace files (names inside its trace_dir)."""
    run_href: str = ""
    """The run folder relative to the run page, for links to its files (traces)."""
    run_path: str = ""
    """The run folder as given to `ddpbench report` (for commands and snippets the reader copies)."""
    optimizer_steps: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    """Per configuration, its slowest rank's mean step and optimizer step as timed (optimizer_lead.config_phases):
    the optimizer's lead beside the answer, in bench's figures."""


def summarize_run(
    meta: dict[str, Any],
    configs: pd.DataFrame,
    steps: pd.DataFrame,
    ranks: pd.DataFrame,
    recommendations: pd.DataFrame | None = None,
    *,
    floor: pd.DataFrame | None = None,
    predictions: pd.DataFrame | None = None,
    **where: Any,
) -> RunData:
    """`where`: traces, run_href, run_path (see RunData)."""
    series = slowest_rank_series(steps)
    return RunData(
        **where,
        recommendations=recommendations if recommendations is not None else pd.DataFrame(),
        floor=floor if floor is not None else pd.DataFrame(),
        predictions=predictions if predictions is not None else pd.DataFrame(),
        meta=meta,
        configs=with_labels(configs),
        ranks=ranks,
        phases=phase_means(steps),
        optimizer_steps=optimizer_lead.config_phases(steps),
        boxes=box_stats(series),
        series=downsample(series),
    )


def world_sizes(configs: pd.DataFrame) -> list[int]:
    return sorted(int(n) for n in configs.get("world_size", pd.Series(dtype=int)).dropna().unique())


def precision(configs: pd.DataFrame) -> str:
    """What the ranks computed in, in the console's words at launch (harness/commands/bench.py): 'bf16 autocast
    (parameters fp32), TF32 off', 'fp32, TF32 on'; TF32 only on a GPU, where the run recorded it; '' where
    the rows do not say (several setups: each, joined by ' or ')."""
    ok = configs[configs["status"] == "ok"] if "status" in configs else configs
    if "dtype" not in ok:
        return ""
    said = [_precision(row) for _, row in ok.iterrows() if isinstance(row["dtype"], str)]
    return " or ".join(dict.fromkeys(said))


def _precision(row: pd.Series) -> str:
    compute = "fp32" if row["dtype"] == "fp32" else f"{row['dtype']} autocast (parameters fp32)"
    tf32 = row.get("tf32")
    known = row.get("device") != "cpu" and tf32 is not None and not pd.isna(tf32)
    return f"{compute}, TF32 {'on' if tf32 else 'off'}" if known else compute


def machine_summary(meta: dict[str, Any], configs: pd.DataFrame) -> str:
    """'CPU, gloo, up to 2 ranks' or '8 × NVIDIA H100, NCCL, up to 8 ranks on 1 node' ('up to 1 rank (2 planned)'
    where the run's plan holds world sizes larger than any it recorded)."""
    planned = [c["world_size"] for c in meta.get("configurations", []) if c.get("world_size") is not None]
    most = max(world_sizes(configs) or planned or [0])
    # a run stopped before its larger world sizes: 'up to 1 rank' alone read as all it asked for
    more = f" ({max(planned)} planned)" if planned and max(planned) > most else ""
    ranks = f"up to {counted(most, 'rank')}{more}"
    if meta.get("device") == "cuda":
        environment = meta.get("environment", {})
        gpu = environment.get("gpu_name") or "GPU"
        count = environment.get("gpu_count") or ""
        nnodes = int(configs["nnodes"].max()) if "nnodes" in configs and configs["nnodes"].notna().any() else 1
        nodes = f" on {counted(nnodes, 'node')}"
        return f"{count} × {gpu}, {str(meta.get('backend') or 'nccl').upper()}, {ranks}{nodes}".lstrip(" ×")
    return f"CPU, {meta.get('backend') or 'gloo'}, {ranks}"


def hosts_text(meta: dict[str, Any]) -> str:
    """The run's host, or on a run across nodes every node's (run.json's `nodes`, node 0's record of each node's
    launch): 'the run spanned 2 nodes: node 0 host-a (torch 2.5.1, git 1a2b3c4); node 1 host-b (…)'; a node node 0
    could not learn of, 'node 1 unknown host (its launcher left no plan …)'."""
    nodes = meta.get("nodes") or []
    if len(nodes) < 2:
        return str((meta.get("environment") or {}).get("hostname") or "")
    said = []
    for node in nodes:
        gpus = f"{node['gpu_count']} × {node['gpu_name']}" if node.get("gpu_name") and node.get("gpu_count") else None
        torch, git = (f"{name} {node[key]}" if node.get(key) else None for key, name in
                      (("torch_version", "torch"), ("git_sha", "git")))  # fmt: skip
        known = ", ".join(fact for fact in (gpus, torch, git, node.get("unknown")) if fact)  # or why not known
        said.append(
            f"node {node.get('node_rank')} {node.get('hostname') or 'unknown host'}" + f" ({known})" * bool(known)
        )
    return f"the run spanned {len(nodes)} nodes: {'; '.join(said)}"


WINDOW_THROUGHPUT = "window_samples_per_s"
"""Samples of all ranks in the measured window over its wall time: throughput as a run delivers it, the steps and
what runs between them (zeroing, the batch, gaps). Runs from before the column have the median step's instead."""


def throughput_column(configs: pd.DataFrame) -> str:
    """The window's throughput where every row has it, else the median step's (`samples_per_s`)."""
    has_window = WINDOW_THROUGHPUT in configs and configs[WINDOW_THROUGHPUT].notna().all()
    return WINDOW_THROUGHPUT if has_window else "samples_per_s"
