"""Warnings shown where decisions are made (the top of a run page, next to the answer): noisy
configurations, ranks sharing a device, a run with one world size, a run that did not finish; beside the
answer, each sweep's verdict on the bucket cap. Pure: a run's metadata and configs in, sentences (HTML) out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import drift, roles, stats, why
from harness.results import contention
from harness.results.values import counted
from reports.aggregate import usable_cores
from reports.pages.html import esc
from reports.pages.notes.hidden import NEGLIGIBLE_COMM


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


def one_world_size(configs: pd.DataFrame, meta: dict[str, Any] | None = None) -> list[str]:
    """One rank only, and --gpus 2 the way to more; not where the run's plan holds larger world sizes it never ran (a
    run stopped before its 2-rank launch once was told to run with --gpus 2: `interrupted` gives its --resume)."""
    ok = configs[configs["status"] == "ok"]
    if ok.empty or set(ok["world_size"].dropna().astype(int)) != {1}:
        return []
    if any(world > 1 for world in _never_ran(meta or {}, configs)):
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
    """Planned configurations that have no row: the run was stopped (Ctrl-C, a crash, a lost node), or, where no
    summary.json says it ended (site.py's `ended`, ENDED_WORDS), maybe still running; a stopped one says what it
    stopped before (`stopped_before`)."""
    planned = {c.get("config_id") for c in meta.get("configurations") or [] if c.get("config_id")}
    done = set(configs["config_id"]) if "config_id" in configs else set()
    missing = planned - done
    if not missing:
        return []
    before = stopped_before(meta, configs)
    heading = f"Stopped before {before}" if before else "Stopped"
    return [
        f"<b>{esc(heading) if meta.get('ended') == STOPPED else 'Unfinished (still running or stopped)'}:</b> "
        f"{len(planned & done)} of {len(planned)} planned configurations were recorded; "
        f"{len(missing)} never ran. Finish the run with <code>{esc(resume_command)}</code>."
    ]


STOPPED, COMPLETE = "stopped", "complete"
"""How a run's files say it ended (index.ended, from its last session's summary.json): stopped, or at its end."""
ENDED_WORDS = {STOPPED: "stopped before its end", COMPLETE: "", None: "unfinished: still running or stopped"}
"""What the index says of a run with configurations not run, by how its files say it ended: only a summary.json a
session wrote at its end says it stopped; a run still going has written none yet."""


def ended_words(meta: dict[str, Any], configs: pd.DataFrame) -> str:
    """The index's word (HTML) on a run with configurations not run: 'stopped before its 2-rank configurations:
    <code>ddpbench bench --resume …</code> finishes it' (the command as site.py puts it in `resume_command`), where
    its plan says what it never ran; else ENDED_WORDS's. 'stopped before its end' of a run stopped before its 2-rank
    launch read as done with what it could run, beside 'up to 1 rank'."""
    before = stopped_before(meta, configs) if meta.get("ended") == STOPPED else ""
    if not before:
        return esc(ENDED_WORDS[meta.get("ended")])
    command = meta.get("resume_command")
    return f"stopped before {esc(before)}" + (f": <code>{esc(command)}</code> finishes it" if command else "")


def _never_ran(meta: dict[str, Any], configs: pd.DataFrame) -> dict[int, tuple[int, int]]:
    """{world size: (configurations never run, planned)} of the world sizes the run's plan (run.json) holds that it
    did not all run; {} where the plan does not say its world sizes (a run from before it did)."""
    done = set(configs["config_id"]) if "config_id" in configs else set()
    planned = [c for c in meta.get("configurations") or [] if c.get("config_id")]
    if any(c.get("world_size") is None for c in planned):
        return {}
    by_world: dict[int, tuple[int, int]] = {}
    for c in planned:
        missing, total = by_world.get(int(c["world_size"]), (0, 0))
        by_world[int(c["world_size"])] = (missing + (c["config_id"] not in done), total + 1)
    return {world: counts for world, counts in sorted(by_world.items()) if counts[0]}


def stopped_before(meta: dict[str, Any], configs: pd.DataFrame) -> str:
    """'its 2-rank configurations' ('1 of its 2 configurations at 1 rank and its 2-rank configurations'): what the
    run's plan holds that it never ran, by world size; '' where nothing is missing or the plan does not say."""
    said = [f"its {world}-rank configurations" if missing == total
            else f"{missing} of its {total} configurations at {counted(world, 'rank')}"
            for world, (missing, total) in _never_ran(meta, configs).items()]  # fmt: skip
    return " and ".join(said)


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
        *one_world_size(configs, meta),
        *short_warmup(meta, configs),
        *nothing_to_shard(configs),
        *noisy(configs),
    ]
    return "".join(folded(s) for s in sentences)


def folded(sentence: str) -> str:
    """A warning banner one line high, the rest of it a click away: four banners of two or three lines each pushed
    the run page's answer below a 900-pixel window's fold."""
    return f'<details class="banner warning"><summary>{sentence}</summary></details>'


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


def cap_verdicts(
    recommendations: pd.DataFrame, *, workload: str, world: int, explain: bool = True, run: str | None = None
) -> tuple[str, bool]:
    """'<b>Bucket cap</b> (each sweep's verdict, section 3): stock: use bucket_cap_mb=1 (25 MiB takes 1.49× as
    long …); bucketed: too few repeats to tell (have 16, need about 189)' for the strategies the run swept at this
    world size; '' where it swept none (a walkthrough tuning the cap found its answer in a table cell only).
    `explain`: the buckets every cap made and why, at the first flat sweep whose caps made one layout (said once a
    page); with the html, whether it said them. `run`: the run as the predict command that prices a smaller size's
    caps on the full size names it (invocation.page_run_words)."""
    from harness.analysis.verdicts import layouts, sweep

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
        said.append(f"{sweep.label(row)} — {verdict}{so_far}{layouts.smaller_size_caps(row, run=run)}")
    if not said:
        return "", False
    return (
        f"<p class=headline><b>Bucket cap</b> (each sweep's verdict, section 3): {esc('. '.join(said))}.</p>",
        explained,
    )
