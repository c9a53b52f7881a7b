"""Warnings shown where decisions are made (the top of a run page, next to the answer): noisy
configurations, ranks sharing a device, a run with one world size, a run that did not finish; and beside the
answer and the floor figure, a winner or a bar below its floor (a measured bound, with its own noise).
Pure: a run's metadata and configs in, sentences (HTML) out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import drift, roles, stats, why
from harness.results import contention
from harness.results.values import counted
from reports.aggregate import usable_cores
from reports.pages.html import esc


def noisy(configs: pd.DataFrame) -> list[str]:
    """The configurations the answer's noise column marks noisy (rows_noise_note over their repeats: the
    median step CV above NOISY_CV, repeats' medians more than NOISY_CV apart, or steps that drift within
    the window in most repeats), counted as configurations, not as repeats, and by kind: the banner and the
    table must not disagree on what is noisy."""
    ok = configs[configs["status"] == "ok"]
    if "step_ms_median" not in ok:
        return []
    ok = ok.dropna(subset=["step_ms_median"])  # the rows the answer ranks
    keys = [key for key in why.SAME_CONFIGURATION if key in ok]
    if ok.empty or not keys:
        return []
    kinds = [_noise_kinds(group) for _, group in ok.groupby(keys, dropna=False)]
    loud = [kind for kind in kinds if kind]
    if not loud:
        return []
    both = " (some more than one way)" if any(len(kind) > 1 for kind in loud) else ""
    return [
        f"<b>Noisy:</b> {len(loud)} of {len(kinds)} measured configurations are noisy, as the answer's noise column "
        f"marks them{both}: {_noise_counts(loud)}. Differences between them may be chance. Rerun with more --steps "
        "and --repeats (under --repeats auto, a higher --max-repeats) on a quieter machine before acting on them."
    ]


def _known(group: pd.DataFrame, column: str) -> list[float | None]:
    """A configuration's figures of one column, a repeat each: None where null or where the run (an older
    schema) has no such column."""
    return [None if pd.isna(v) else float(v) for v in group[column]] if column in group else [None] * len(group)


def rows_noise_note(group: pd.DataFrame) -> str:
    """stats.noise_note over a configuration's rows (its repeats), as the answer's noise column and the banner
    both judge it; a figure an older run did not record is unknown, never noisy."""
    medians = [float(m) for m in group["step_ms_median"]]
    drifts, ses = _known(group, "step_ms_drift"), _known(group, "step_ms_drift_se")
    return stats.noise_note(_known(group, "step_ms_cv"), medians, drifts=drifts, drift_ses=ses)


def _noise_kinds(group: pd.DataFrame) -> dict[str, float]:
    """What is noisy about one configuration, by kind, with how noisy: 'steps' its repeats' median step CV,
    'repeats' how far apart its repeats' medians are (highest / lowest − 1), 'drift' its flagged repeats'
    largest drift; {} where rows_noise_note finds nothing."""
    note = rows_noise_note(group)  # the table's own rule; its words say which kind
    medians = [float(m) for m in group["step_ms_median"]]
    kinds = {}
    if "noisy steps" in note:
        kinds["steps"] = float(np.median([cv for cv in _known(group, "step_ms_cv") if cv is not None]))
    if "repeats disagree" in note:
        kinds["repeats"] = max(medians) / min(medians) - 1
    if "steps drift" in note:
        pairs = zip(_known(group, "step_ms_drift"), _known(group, "step_ms_drift_se"), strict=True)
        kinds["drift"] = max((d for d, se in pairs if drift.drift_flagged(d, se)), key=abs)
    return kinds


def _noise_counts(loud: list[dict[str, float]]) -> str:
    """'2 with noisy steps (…), 6 whose repeats disagree (…)': a configuration noisy several ways counts in each."""
    steps = [kind["steps"] for kind in loud if "steps" in kind]
    spread = [kind["repeats"] for kind in loud if "repeats" in kind]
    drifts = [kind["drift"] for kind in loud if "drift" in kind]
    said = []
    if steps:
        said.append(f"{len(steps)} with noisy steps (the median step CV over the configuration's repeats above "
                    f"{stats.NOISY_CV:g}; up to {max(steps):.2f})")  # fmt: skip
    if spread:
        said.append(f"{len(spread)} whose repeats disagree (their median steps more than {stats.NOISY_CV:.0%} "
                    f"apart; up to {max(spread):.0%})")  # fmt: skip
    if drifts:
        said.append(f"{len(drifts)} whose steps drift within the measured window (the last steps' level at least "
                    f"{drift.DRIFT_FLOOR:.0%} and {drift.DRIFT_Z:g} standard errors from the first ones' in most "
                    f"repeats; up to {max(drifts, key=abs):+.1%}: where they got faster, more --warmup)")  # fmt: skip
    return ", ".join(said)


def repeats_text(medians: list[float]) -> str:
    """'its 2 repeats 64.03–64.18 ms', or 'one repeat': the evidence behind a figure drawn or ranked."""
    if len(medians) < 2:
        return "one repeat"
    return f"its {len(medians)} repeats {min(medians):.2f}–{max(medians):.2f} ms"


def local_spread(medians: list[float]) -> str:
    """What local's repeats say of the floor they make: 'local's 2 repeats spread 51.14–98.80 ms, so the floor is
    measured noisily', where they disagree as the noise column judges; else that it is a measurement too."""
    if len(medians) < 2:
        return "local ran once: the floor is one measurement, with that launch's noise"
    spread = f"local's {len(medians)} repeats spread {min(medians):.2f}–{max(medians):.2f} ms"
    if "repeats disagree" in stats.noise_note([], medians):
        return spread + ", so the floor is measured noisily"
    return spread + ": the floor is a measurement too, not an exact bound"


def answer_below_floor(group: pd.DataFrame) -> str:
    """A note under one world size's answer table (pooled.ranked rows) where its winner comes out faster than
    local, the floor the table lists last: both are measured, so the floor bounds it only as far as its noise."""
    floor, contenders = group[group["is_floor"]], group[~group["is_floor"]]
    if floor.empty or contenders.empty or contenders.iloc[0]["step_ms"] >= floor.iloc[0]["step_ms"]:
        return ""
    best, local = contenders.iloc[0], floor.iloc[0]
    said = (f"{best['strategy']} ({best['step_ms']:.2f} ms; {repeats_text(best['repeat_ms'])}) comes out below "
            f"local, the floor ({local['step_ms']:.2f} ms); {local_spread(local['repeat_ms'])}.")  # fmt: skip
    return f'<p class="banner warning"><b>Below the floor:</b> {esc(said)}</p>'


LATE_COMPLETIONS = "completions late"
"""The words of the `comm_note` a rank writes where gloo runs on CUDA (harness/rank/configuration.py's
GLOO_ON_CUDA; the reports read the results, not the rank's code): gloo marks its work done on the compute
stream, so each collective counts as in flight until compute could use its result."""
UPPER_BOUND = "upper bound: gloo on CUDA completes on the compute stream"
HIDDEN_LOWER = "hidden share a lower bound"
"""The words of the `comm_note` of a strategy whose stamps count every collective as holding compute up from its
launch (impls/fsdp.py's ALL_GATHERS_BLOCK, on a GPU): its hidden share reads low."""
NOTHING_TO_HIDE = "nothing to hide at one rank"
NEGLIGIBLE_COMM = 0.01
"""Communication under this share of the step: what share of it is hidden is noise."""


def completions_late(rows: pd.DataFrame) -> bool:
    """Whether any of a strategy's rows (its repeats) timed its collectives with late completions (gloo on CUDA)."""
    return _noted(rows, LATE_COMPLETIONS)


def hidden_at_least(rows: pd.DataFrame) -> bool:
    """Whether any of a strategy's rows says its hidden share is a lower bound (fsdp's all-gathers on a GPU)."""
    return _noted(rows, HIDDEN_LOWER)


def _noted(rows: pd.DataFrame, words: str) -> bool:
    return any(isinstance(note, str) and words in note for note in rows.get("comm_note", []))


def nothing_to_hide(row: pd.Series) -> bool:
    """Whether a pooled row (pooled.ranked) communicates nothing worth a share hidden: at one rank NCCL moves no
    byte (what is timed is the launches: 0.05 ms of a 55 ms step, 0 % or 91 % hidden by chance), nor does any
    backend whose communication is a sliver of the step; gloo on CUDA still copies host↔device, which stays."""
    comm = row.get("comm_ms")
    if row.get("world_size") != 1 or comm is None or pd.isna(comm):
        return False
    return row.get("backend") == "nccl" or comm < NEGLIGIBLE_COMM * row["step_ms"]


def hidden_cell(row: pd.Series) -> str:
    """The answer's 'comm. hidden' cell: the share, '(upper bound)' where completions were late, '(lower bound)'
    where every all-gather counted as holding compute up, or that at one rank there is nothing to hide."""
    overlap = row.get("overlap_efficiency")
    if overlap is None or pd.isna(overlap):
        return "—"
    if nothing_to_hide(row):
        return "nothing to hide"  # the table's heading names its one rank
    bound = " (upper bound)" if row.get("comm_late") else (" (lower bound)" if row.get("hidden_low") else "")
    return f"{overlap:.0%}{bound}"


def late_note(group: pd.DataFrame) -> str:
    """A note under an answer table whose 'comm. hidden' cells rest on late completions (gloo on CUDA)."""
    if "comm_late" not in group or not group["comm_late"].any():
        return ""
    return ('<p class="banner warning"><b>Upper bound:</b> gloo on CUDA completes its collectives on the compute '
            "stream, so each counts as done only when compute could use its result: communication, and the share "
            "of it hidden behind compute, read high (the configurations' <code>comm_note</code>).</p>")  # fmt: skip


def figure_below_floor(rows: pd.DataFrame, configs: pd.DataFrame) -> str:
    """A note under the floor figure naming each drawn bar below its tick (rows: network.with_floor's), per world
    size, with where that floor comes from: local's repeats, or the collectives run's fitted all-reduce."""
    under = rows[rows["step_ms_median"] < rows["floor_ms"]]
    notes = []
    for world, group in under.groupby("world_size"):
        bars = "; ".join(f"{r['config_label']} drawn at {r['step_ms_median']:.2f} ms, under its floor of "
                         f"{r['floor_ms']:.2f} ms ({repeats_text(_alike(configs, r, why.SAME_CONFIGURATION))})"
                         for _, r in group.iterrows())  # fmt: skip
        notes.append(f"<b>Below the floor at {int(world)} ranks:</b> {esc(bars)}. {esc(_floor_source(group, configs))}")
    return "".join(f'<p class="banner warning">{note}</p>' for note in notes)


def _floor_source(group: pd.DataFrame, configs: pd.DataFrame) -> str:
    """Why a floor can be beaten: it is local's measured step, or an all-reduce fitted to noisy timings."""
    said = []
    if (group["floor_ms"] == group["local_ms"]).any():
        setup = [key for key in why.SAME_CONFIGURATION if key not in ("impl", "impl_options")]
        local = _alike(configs[roles.is_baseline(configs)], group.iloc[0], setup)
        said.append(f"There the floor is local's step, the geometric mean of its repeats' medians: "
                    f"{local_spread(local)}.")  # fmt: skip
    if (group["floor_ms"] != group["local_ms"]).any():
        said.append("Where the floor is the all-reduce, it is the collectives run's fitted latency and bandwidth "
                    "applied to the bytes sent: a fit to noisy timings, not a bound measured in this run.")  # fmt: skip
    return " ".join(said)


def _alike(configs: pd.DataFrame, row: pd.Series, keys: tuple[str, ...] | list[str]) -> list[float]:
    """The ok repeats' median steps of the configurations that match `row` on `keys` (nulls match nulls)."""
    mask = configs["status"] == "ok"
    for key in (k for k in keys if k in configs and k in row):
        mask &= configs[key].isna() if pd.isna(row[key]) else configs[key] == row[key]
    return [float(ms) for ms in configs.loc[mask, "step_ms_median"].dropna()]


def shared_devices(meta: dict[str, Any], configs: pd.DataFrame) -> list[str]:
    """Ranks per node above the GPUs (on GPUs) or rank threads above the cores (on the CPU) of the machine."""
    environment = meta.get("environment") or {}
    worlds = configs["world_size"].dropna().astype(int) if "world_size" in configs else pd.Series(dtype=int)
    if worlds.empty:
        return []
    nnodes = int(configs["nnodes"].max()) if "nnodes" in configs and configs["nnodes"].notna().any() else 1
    per_node = -(-int(worlds.max()) // max(nnodes, 1))
    if meta.get("device") == "cuda":
        gpus = _gpus_per_node(meta)
        if gpu_shared_worlds(meta, configs):  # the one rule of who shared a GPU, as the memory section uses
            return [
                f"<b>Devices shared:</b> {per_node} ranks per node ran on {counted(gpus, 'GPU')}, so "
                "several ranks took turns on one device: step times and scaling efficiency at that world size "
                "measure the oversubscription, not the strategy."
            ]
        return []
    threads = int(meta.get("threads_per_rank") or 1)
    cores = usable_cores(environment)
    if cores and per_node * threads > cores:
        return [
            f"<b>Cores shared:</b> {counted(per_node, 'rank')} × {counted(threads, 'thread')} ran on "
            f"{counted(cores, 'core')}: ranks took turns, "
            "so communication and compute slowed each other more than on separate devices."
        ]
    return []


def _gpus_per_node(meta: dict[str, Any]) -> int:
    environment = meta.get("environment") or {}
    return int(environment.get("gpu_count") or len(environment.get("gpus") or []))


def gpu_memory_mb(meta: dict[str, Any]) -> float | None:
    """One GPU's memory as the run's environment recorded it (the smallest, where they differ); None on a CPU."""
    sizes = [g["memory_mb"] for g in (meta.get("environment") or {}).get("gpus") or [] if g.get("memory_mb")]
    return float(min(sizes)) if sizes and meta.get("device") == "cuda" else None


def gpu_shared_worlds(meta: dict[str, Any], configs: pd.DataFrame) -> set[int]:
    """The world sizes whose ranks took turns on a GPU (more ranks per node than GPUs, as the banner says): there
    NVML's device peak is every rank's on it, and each rank's own is its process's (mem_peak_nvml_process_mb)."""
    gpus = _gpus_per_node(meta)
    if meta.get("device") != "cuda" or not gpus or "world_size" not in configs:
        return set()
    nnodes = configs["nnodes"] if "nnodes" in configs else pd.Series(1, index=configs.index)
    per_node = -(-configs["world_size"] // nnodes.fillna(1).clip(lower=1))
    return {int(world) for world in configs.loc[per_node > gpus, "world_size"].dropna()}


def one_world_size(configs: pd.DataFrame) -> list[str]:
    ok = configs[configs["status"] == "ok"]
    if ok.empty or set(ok["world_size"].dropna().astype(int)) != {1}:
        return []
    # Gloo on CUDA still stages every bucket through the host at one rank: that is measured, but exchanges nothing.
    said = "there is no other rank (what it timed as communication is one rank's own copies, not an exchange)"
    said = said if _moves_data(ok) else "nothing is communicated"
    return [
        f"<b>One rank only:</b> at world size 1 {said}, so there is no strategy or bucket cap to "
        "recommend; run with --gpus 2 or more."
    ]


def _moves_data(ok: pd.DataFrame) -> bool:
    """Whether a one-rank row timed communication that is more than a sliver of its step on a backend that moves
    data at one rank (not NCCL, which moves none): gloo on CUDA copies each bucket to the host and back."""
    if "comm_ms" not in ok:
        return False
    backend = ok["backend"] if "backend" in ok else pd.Series(None, index=ok.index)
    moved = ok["comm_ms"].fillna(0) >= NEGLIGIBLE_COMM * ok["step_ms_median"]
    return bool((moved & (backend != "nccl")).any())


def short_warmup(meta: dict[str, Any], configs: pd.DataFrame) -> list[str]:
    """Configurations measured before their strategy was steady: a warm-up shorter than the one the strategy
    declares on the device (roles.warmup_short_by: an explicit --warmup, or a run from before strategies
    declared it). Their first measured steps are start-up, not the steady step the figures stand for."""
    rows = roles.short_warmups(configs)
    if rows.empty:
        return []
    typed = "--warmup" in (meta.get("command") or [])
    remedy = ("Rerun without --warmup to give each its own." if typed else "The run's ddpbench predates the "
              "warm-ups strategies declare: rerun with this one (its Reproduce command then measures "
              "them).")  # fmt: skip
    named = [f"{esc(impl)} on {esc(device)} ({int(warmup)} of the {int(needed)} steps it needs)"
             for (impl, device, warmup, needed), _ in rows.groupby(["impl", "device", "warmup", "needed"])]  # fmt: skip
    return [
        f"<b>Warm-up too short:</b> {', '.join(named)}: their first measured steps were start-up, not steady (a "
        "strategy declares the warm-up it needs on a device: <code>ddpbench list</code>), so their step times may "
        f"read high. {remedy}"
    ]


def interrupted(meta: dict[str, Any], configs: pd.DataFrame, *, resume_command: str) -> list[str]:
    """Planned configurations that have no row: the run was stopped (Ctrl-C, a crash, a lost node)."""
    planned = {c.get("config_id") for c in meta.get("configurations") or [] if c.get("config_id")}
    done = set(configs["config_id"]) if "config_id" in configs else set()
    missing = planned - done
    if not missing:
        return []
    return [
        f"<b>Interrupted:</b> {len(planned & done)} of {len(planned)} planned configurations were recorded; "
        f"{len(missing)} never ran. Finish the run with <code>{esc(resume_command)}</code>."
    ]


def not_alone(records: list[dict[str, Any]] | None) -> list[str]:
    """What else ran beside the launches, where it may have moved the figures (harness.results.contention)."""
    said = contention.findings(records)
    return [f"<b>Not alone on the machine:</b> {esc('; '.join(said))}."] if said else []


def nothing_to_shard(configs: pd.DataFrame) -> list[str]:
    """A strategy that shards only the optimizer's state, run with an optimizer that keeps none (roles.shards_nothing):
    its memory and step are that optimizer's, in bench's words."""
    said = roles.shards_nothing_words(configs[configs["status"] == "ok"]) if "status" in configs else ""
    return [f"<b>Nothing to shard:</b> {esc(said)}."] if said else []


def alerts(
    meta: dict[str, Any], configs: pd.DataFrame, *, resume_command: str, launches: list[dict[str, Any]] | None = None
) -> str:
    sentences = [
        *interrupted(meta, configs, resume_command=resume_command),
        *shared_devices(meta, configs),
        *not_alone(launches),
        *one_world_size(configs),
        *short_warmup(meta, configs),
        *nothing_to_shard(configs),
        *noisy(configs),
    ]
    return "".join(f'<p class="banner warning">{s}</p>' for s in sentences)


def status_counts(meta: dict[str, Any], configs: pd.DataFrame) -> dict[str, int]:
    """ok, failed, skipped and planned-but-never-run (a run stopped early), counted apart."""
    counts = configs["status"].value_counts().to_dict() if "status" in configs and not configs.empty else {}
    planned = {c.get("config_id") for c in meta.get("configurations") or [] if c.get("config_id")}
    done = set(configs["config_id"]) if "config_id" in configs else set()
    return {
        "ok": int(counts.get("ok", 0)),
        "failed": int(counts.get("failed", 0)),
        "skipped": int(counts.get("skipped", 0)),
        "not run": len(planned - done),
    }


def cap_verdicts(recommendations: pd.DataFrame, *, workload: str, world: int, explain: bool = True) -> tuple[str, bool]:
    """'<b>Bucket cap</b> (each sweep's verdict, section 3): stock: use bucket_cap_mb=1 (25 MiB takes 1.49× as
    long …); bucketed: too few repeats to tell (have 16, need about 189)' for the strategies the run swept at this
    world size; '' where it swept none (a walkthrough tuning the cap found its answer in a table cell only).
    `explain`: the buckets every cap made and why, at the first flat sweep whose caps made one layout (said once a
    page); with the html, whether it said them."""
    from harness.analysis.verdicts import sweep

    if recommendations.empty or "world_size" not in recommendations:
        return "", False
    rows = recommendations[(recommendations["workload"] == workload) & (recommendations["world_size"] == world)]
    said, explained = [], False
    for _, row in rows.iterrows():
        gain, decided = sweep.versus_reference(row), row.get("decision") != stats.TOO_FEW
        so_far = (
            (f": {gain}" if decided else f"; so far fastest {sweep.point_text(row, row['best_cap_mb'])}, and {gain}")
            if gain
            else ""
        )
        verdict = sweep.answer(row, why=explain)
        if explain and row.get("decision") == stats.FLAT and isinstance(row.get("same_buckets_mb"), str):
            explain, explained = False, True  # sweep.answer said the buckets and why
        said.append(f"{sweep.label(row)} — {verdict}{so_far}")
    if not said:
        return "", False
    return (
        f"<p class=headline><b>Bucket cap</b> (each sweep's verdict, section 3): {esc('. '.join(said))}.</p>",
        explained,
    )
