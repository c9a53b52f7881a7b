"""One sentence per section, computed from the run: what its figures show, said before them.

Pure functions over a run's configs; each returns "" when the run has nothing to say there (one
world size, nothing measured), never a sentence about data that is not in the run. Every sentence
reads the answer table's pooled frame (pooled.ranked: one row per strategy, repeats pooled), so the
page names one fastest strategy, and no sentence lists a repeat as if it were a strategy.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis import stats
from harness.analysis.verdicts import decide
from harness.perfmodel.memory import mib_text
from harness.results.invocation import page_run_words
from harness.results.values import counted, message_words, options_of
from reports.aggregate import usable_cores, world_label
from reports.pages import evidence, pooled
from reports.pages.legend import deployable
from reports.pages.notes import hidden, winner
from reports.pages.whatif.full_size import default_configuration, yours_instead


def _largest_world(configs: pd.DataFrame, *, workload: str) -> pd.DataFrame:
    """The pooled strategies (pooled.ranked) at the run's largest world size, the floor (the baseline) left out."""
    frame = pooled.ranked(configs, workload=workload)
    if frame.empty:
        return frame
    return frame[(frame["world_size"] == frame["world_size"].max()) & ~frame["is_floor"]]


def fastest(configs: pd.DataFrame, *, workload: str, confidence: float = stats.CONFIDENCE) -> str:
    """'At 2 ranks bucketed is fastest (114.3 ms): …; naive is slowest, at 2.63× bucketed's step.' ('leads' and 'trails
    so far' where the repeats do not back it: 'slowest', as 'fastest', is said of a decided verdict alone).
    The same verdict as the answer table's headline at that world size (winner.lead), at the run's
    confidence (pooled.run_confidence)."""
    frame = pooled.ranked(configs, workload=workload, confidence=confidence)
    if frame.empty:
        return ""
    group = evidence.one_layout_pooled(frame[frame["world_size"] == frame["world_size"].max()])  # as the headline
    contenders = group[~group["is_floor"]]
    if contenders.empty:
        return ""
    name, words = winner.lead(group)
    sentence = f"At {world_label(int(group['world_size'].iloc[0]))} {name}{words}"
    judged = deployable(contenders)  # the leader lead() names, and those below it
    best, worst = judged.iloc[0], judged.iloc[-1]
    if len(judged) > 2:  # with two, 'next' already named the slowest
        slowest = decide.versus(worst["step_ms"] / best["step_ms"], decide.step_of(best["strategy"]))
        proof = evidence.evidence(best, worst)
        if proof.get("same_buckets"):  # its cap made best's buckets: one measurement
            slowest += ", though it makes the same buckets: one measurement, apart by the launches' spread"
        # 'slowest' is a decided word, as 'fastest' is: an interval of 0.52–1.14 backs no 'slowest'
        verb = {evidence.SIGNIFICANT: "is slowest", evidence.NOT_SIGNIFICANT: f"trails ({evidence.NO_CHANGE_SHOWN})"}
        if int(best["world_size"]) == 1:  # winner.ONE_RANK: no verdict is about it, whatever its repeats showed
            verb = {proof["judged"]: "trails (not judged at one rank)"}
        said = "is slowest" if proof.get("same_buckets") else verb.get(proof["judged"], "trails so far")
        sentence += f"; {worst['strategy']} {said}, at {slowest}"  # as every ratio on the page runs
    return sentence + "."


def scaling(configs: pd.DataFrame, *, workload: str, meta: dict | None = None) -> str:
    """'At 2 ranks, share of linear scaling kept against local at one rank (pooled over repeats): bucketed 72%,
    stock 67% (against their own one-rank step: bucketed 80%, stock 75%).' Ranked by the figure against one
    plain process (scaling.pooled_scaling's `scaling_efficiency_vs_local`), which orders as the step times do and
    counts each strategy's own cost at one rank; each one's own scaling after it. Without a `local` row at one
    rank, the own figure alone, named as such. Pooled over repeats, never one repeat's one-rank launch. Where the
    run's ranks shared a CPU's cores (`meta`'s), the most they could keep (cores_bound): a page said 28 % and no
    more, and a reader took it for the model's scaling where 4 ranks on 2 cores keep 50 % at most."""
    rows = evidence.one_layout_pooled(_largest_world(configs, workload=workload))  # a layout's caps: one row
    rows = rows[rows["world_size"] > 1] if not rows.empty else rows
    figures = ["scaling_efficiency", "scaling_efficiency_vs_local"]
    rows = rows[rows[figures].notna().any(axis=1)] if not rows.empty else rows
    if rows.empty:
        return ""
    repeats = " (pooled over repeats)" if (rows["repeats"] > 1).any() else ""
    world = world_label(int(rows["world_size"].iloc[0]))
    nodes = configs["nnodes"].max() if "nnodes" in configs and configs["nnodes"].notna().any() else 1
    bound = cores_bound(meta or {}, int(rows["world_size"].iloc[0]), nnodes=int(nodes))
    own = rows.dropna(subset=["scaling_efficiency"]).sort_values("scaling_efficiency", ascending=False, kind="stable")
    own_parts = ", ".join(f"{r.strategy} {r.scaling_efficiency:.0%}" for r in own.itertuples())
    if rows["scaling_efficiency_vs_local"].isna().any():  # one baseline for all, or none ranked against it
        if own.empty:
            return ""
        return (f"At {world}, share of linear scaling kept against each one's own one-rank step{repeats}: "
                f"{own_parts}{bound}.")  # fmt: skip
    ranked = rows.sort_values("scaling_efficiency_vs_local", ascending=False, kind="stable")
    parts = ", ".join(f"{r.strategy} {r.scaling_efficiency_vs_local:.0%}" for r in ranked.itertuples())
    beside = f" (against their own one-rank step: {own_parts})" if own_parts else ""
    return f"At {world}, share of linear scaling kept against local at one rank{repeats}: {parts}{beside}{bound}" + \
        _floor_kept(configs, ranked, workload=workload, world=int(rows["world_size"].iloc[0])) + "."  # fmt: skip


def cores_bound(meta: dict, world: int, *, nnodes: int = 1) -> str:
    """'; 4 ranks × 1 thread on 2 cores keep at most 50% here, whatever the strategy' where a CPU run's
    ranks a node (at `world`) needed more cores than it could use (the run's recorded threads a rank and usable
    cores, as the 'Cores shared' banner reads them); '' otherwise."""
    cores = usable_cores(meta.get("environment") or {})
    if meta.get("device") != "cpu" or not cores:
        return ""
    per_node = -(-world // max(nnodes, 1))
    threads = int(meta.get("threads_per_rank") or 1)
    if per_node * threads <= cores:
        return ""
    return (f"; {counted(per_node, 'rank')} × {counted(threads, 'thread')} on {counted(cores, 'core')} keep at most "
            f"{cores / (per_node * threads):.0%} here, whatever the strategy")  # fmt: skip


def _floor_kept(configs: pd.DataFrame, ranked: pd.DataFrame, *, workload: str, world: int) -> str:
    """'; local itself, which communicates nothing, keeps 41%: what the machine leaves any strategy' where the
    baseline at `world` keeps visibly less than all (a walkthrough read stock's 40 % as DDP's cost, where local's
    own was 41 %: the ranks shared two cores); where strategies of `ranked` keep more than it, that, and that it is no
    bound on them (a page said local's 21 % was what the machine left any strategy, beside stock's 28 %); ''
    otherwise."""
    frame = pooled.ranked(configs, workload=workload)
    floor = frame[(frame["world_size"] == world) & frame["is_floor"]] if not frame.empty else frame
    kept = floor["scaling_efficiency"].dropna() if "scaling_efficiency" in floor else floor.iloc[:0]
    if kept.empty or kept.iloc[0] > 0.95:
        return ""
    said = f"; {floor['strategy'].iloc[0]} itself, which communicates nothing, keeps {kept.iloc[0]:.0%}"
    above = [
        r.strategy for r in ranked.itertuples() if round(r.scaling_efficiency_vs_local, 2) > round(kept.iloc[0], 2)
    ]
    if above:
        return (f"{said}, less than {', '.join(above[:-1]) + ' and ' if len(above) > 1 else ''}{above[-1]}: its own "
                "step is a measurement, no bound on theirs (the answer's 'Below the floor' note)")  # fmt: skip
    return f"{said}: what this machine leaves any strategy"


def communication(configs: pd.DataFrame, *, workload: str) -> str:
    """'At 2 ranks bucketed hides 42% of its communication (76.4 ms per step, mean) …; naive hides none
    (by design: it communicates after backward).' The reason only where it holds: strategies that declare
    every collective after backward (`comm_after_backward`), with nothing for compute to hide them behind."""
    rows = _largest_world(configs, workload=workload)
    if rows.empty:
        return ""
    rows = rows[rows["comm_ms"].map(lambda ms: ms is not None and ms > 0)].dropna(subset=["overlap_efficiency"])
    if rows.empty:
        return ""
    idle = rows.apply(hidden.nothing_to_hide, axis=1)
    if idle.all():  # NCCL at one rank: the share hidden of a few launches is chance
        most = max(float(ms) for ms in rows["comm_ms"])
        return (f"{hidden.NOTHING_TO_HIDE.capitalize()}: no other rank to exchange gradients with (what was timed, "
                f"at most {most:.2f} ms per step, is the collectives' own overhead).")  # fmt: skip
    ranked = rows[~idle].sort_values("overlap_efficiency", ascending=False, kind="stable")
    hiding = [r for r in ranked.itertuples() if r.overlap_efficiency >= 0.005]
    said = [
        f"{r.strategy} hides {r.overlap_efficiency:.0%} of its communication ({r.comm_ms:.1f} ms per step, mean"
        f"{'; ' + message_words(r.comm_bytes) if message_words(getattr(r, 'comm_bytes', None)) else ''})"
        for r in hiding
    ]
    none = [r for r in ranked.itertuples() if r.overlap_efficiency < 0.005]
    by_design = [r.strategy for r in none if r.comm_after_backward]
    others = [r.strategy for r in none if not r.comm_after_backward]
    if others:
        said.append(f"{' and '.join(others)} hide{'s' if len(others) == 1 else ''} none")
    if by_design:
        one = len(by_design) == 1
        said.append(
            f"{' and '.join(by_design)} hide{'s' if one else ''} none (by design: "
            f"{'it communicates' if one else 'they communicate'} after backward)"
        )
    return f"At {world_label(int(ranked['world_size'].iloc[0]))} " + "; ".join(said) + _late(ranked) + "."


def _late(ranked: pd.DataFrame) -> str:
    """' (upper bound: gloo on CUDA …)' where the figures rest on late completions, naming whose where not all's."""
    late = ranked[ranked["comm_late"].astype(bool)] if "comm_late" in ranked else ranked.iloc[0:0]
    if late.empty:
        return ""
    whose = "" if len(late) == len(ranked) else f"{' and '.join(late['strategy'])}: "
    return f" ({whose}{hidden.UPPER_BOUND})"


MEMORY_WHAT = {"mem_peak_nvml_mb": "GPU memory (NVML)", "mem_peak_rss_mb": "process memory (RSS)",
               pooled.PROCESS_PEAK: "GPU memory of one rank (NVML, its process)"}  # fmt: skip


def full_size_pointer(meta: dict, configs: pd.DataFrame, workload: str) -> str:
    """Where the run measured a smaller size than the one to train (--size scales the workload): that these peaks are
    that size's, and which command counts the full size's; '' otherwise."""
    from harness.results.store import size_scales

    sizes = set(configs.loc[configs["workload"] == workload, "size"].dropna()) if "size" in configs else set()
    if not sizes or sizes == {"full"} or not size_scales(meta, {"workload": workload}):
        return ""
    said = ", ".join(sorted(sizes - {"full"}))
    default = default_configuration(meta, workload)  # hf:MODEL_TYPE's full: transformers' defaults, not yours
    which = yours_instead(default) if default else ", the one you will train"
    return (
        f" These are the {said} size's: 'ddpbench predict --run {page_run_words(meta)} --cluster NAME' counts "
        f"the memory of the full size{which}, on the meta device{_one_world(meta, configs, workload)}."
    )


def _one_world(meta: dict, configs: pd.DataFrame, workload: str) -> str:
    """Where the run measured one world size: predict fits a rank's share of the state from two, so this run's
    counts none; what to bench instead. '' where it measured two or more."""
    worlds = sorted(set(configs.loc[configs["workload"] == workload, "world_size"].dropna().astype(int)))
    if len(worlds) != 1:
        return ""
    largest_only = (meta.get("config") or {}).get("ladder") is False and worlds[0] > 1
    rerun = "bench without --largest-only" if largest_only else "bench at --gpus 2"
    ranks = f"{worlds[0]} rank{'s' * (worlds[0] > 1)}"
    return f", once a run has measured two world sizes: this one measured {ranks} alone ({rerun})"


def memory(
    configs: pd.DataFrame, *, workload: str, shared: set[int] | frozenset = frozenset(), gpu_mb: float | None = None
) -> str:
    """'At 2 ranks the largest peak is stock's (1.2 GiB), the smallest fsdp's (0.4 GiB).' Each strategy's
    peak is the highest any of its repeats reached (the one to plan for). Where the ranks shared a GPU (`shared`:
    alerts.gpu_shared_worlds), each rank's own peak, the whole GPU's beside it: that one counts every rank on
    the device, and quoted alone reads as if each rank's memory grew with the world size. With `gpu_mb` (one
    GPU's memory, alerts.gpu_memory_mb), a GPU peak is said as a share of it too: the headroom left."""
    frame = pooled.ranked(configs, workload=workload)
    if frame.empty:
        return ""
    rows = frame[frame["world_size"] == frame["world_size"].max()]
    known = rows.map(lambda v: v is not None)
    own = int(rows["world_size"].iloc[0]) in shared and known[pooled.PROCESS_PEAK].any()
    columns = (pooled.PROCESS_PEAK,) if own else pooled.MEMORY_PEAKS
    column = next((c for c in columns if known[c].any()), None)
    if column is None:
        return ""
    on_cpu = "device" in configs and (configs.loc[configs["workload"] == workload, "device"] == "cpu").all()
    # Each strategy's figures are the highest of its repeats (pooled._pool): said, as the figures' caption refers here.
    repeated = (rows["repeats"] > 1).any()
    plan = " Each figure is the highest of the strategy's repeats: the one to plan for." if repeated else ""
    if column == "mem_peak_rss_mb" and on_cpu and known[pooled.HELD_STATE].any():  # no GPU: what they shrink
        return _held_state(rows, plan)
    rows = rows[rows[column].map(lambda v: v is not None)].sort_values(column, kind="stable")
    low, high = rows.iloc[0], rows.iloc[-1]
    world = world_label(int(low["world_size"]))
    device = [v for v in rows["mem_peak_nvml_mb"] if v is not None]
    whole = f" (the whole GPU, all ranks on it: {_mib(max(device))})" if own and device else ""
    of_gpu = (f" The largest is {high[column] / gpu_mb:.0%} of the GPU's {_mib(gpu_mb)}."
              if gpu_mb and column != "mem_peak_rss_mb" else "")  # fmt: skip
    if low["strategy"] == high["strategy"]:
        return f"At {world} the peak {MEMORY_WHAT[column]} is {_mib(high[column])}{whole}.{of_gpu}{plan}"
    return (
        f"At {world} the largest peak {MEMORY_WHAT[column]} is {high['strategy']}'s ({_mib(high[column])}), "
        f"the smallest {low['strategy']}'s ({_mib(low[column])}){whole}.{of_gpu}{plan}"
    )


def _held_state(rows: pd.DataFrame, plan: str = "") -> str:
    """Without a GPU's figures: the model state each rank holds, smallest first, then the process's peak RSS as
    what it is. RSS is mostly the interpreter and torch (0.9-1.2 GiB a rank here), so ranking the strategies by it
    named fsdp the largest where it holds half of stock's state. Its figures in three digits (`mib_text`, as the what-if
    page says them): whole MiB said a tiny run's fsdp and zero held '0 MiB' beside stock's '1 MiB'."""
    held = rows[rows[pooled.HELD_STATE].map(lambda v: v is not None)].sort_values(pooled.HELD_STATE, kind="stable")
    parts = ", ".join(f"{r.strategy} {mib_text(getattr(r, pooled.HELD_STATE))}" for r in held.itertuples())
    rss = [v for v in rows["mem_peak_rss_mb"] if v is not None]
    span = f"{_mib(min(rss))}–{_mib(max(rss))}" if len(rss) > 1 else _mib(rss[0])
    world = world_label(int(rows["world_size"].iloc[0]))
    counted = [v for v in rows.get("activation_mb", []) if v is not None and v == v]
    kept = (f"; the model's forward keeps {mib_text(max(counted))} of activations for backward a rank (every strategy "
            "alike; on a GPU add buckets and gathered parameters: a GPU run measures them)" if counted else
            " (on a GPU add activations, buckets and gathered parameters: a GPU run measures them)")  # fmt: skip
    parts += _views(held)
    return (f"At {world} each rank holds in parameters, gradients and optimizer state: {parts}{kept}. Each "
            f"process's peak RSS here ({span}) is mostly the interpreter and torch, no ranking of the "
            f"strategies.{plan}")  # fmt: skip


def _views(held: pd.DataFrame) -> str:
    """'; stock gradient_as_bucket_view=True's gradients (16.2 MiB) are views into its buckets, where stock keeps its
    gradients and a bucket copy of them': what gradient_as_bucket_view saves, which the state alike in every row hid."""
    if pooled.GRAD_VIEW not in held or "keeps_buckets" not in held:
        return ""
    buckets = held[held["keeps_buckets"].fillna(False).astype(bool)]
    viewed = buckets[pooled.GRAD_VIEW].map(lambda v: v is not None and v == v and v > 0)
    if not viewed.any():
        return ""
    views, copies = buckets[viewed], buckets[~viewed]
    one, most = len(views) == 1, max(views[pooled.GRAD_VIEW])
    size = f"{'up to ' if min(views[pooled.GRAD_VIEW]) < most else ''}{mib_text(most)}"
    saved = _bucket_copy(copies)
    if len(views) > 1 and all(options_of(o).get("gradient_as_bucket_view") for o in views["options"]):  # a sweep's
        viewed = f"; with gradient_as_bucket_view=True the gradients ({size}) are views into DDP's buckets"
        if not len(copies):
            return viewed
        return (f"; with gradient_as_bucket_view=True ({len(views)} of them) the gradients ({size}) are views into "
                f"DDP's buckets, where the other {len(copies)} keep a bucket copy beside theirs{saved}")  # fmt: skip
    said = f"; {', '.join(views['strategy'])}'s gradients ({size}) are views into {'its' if one else 'their'} buckets"
    if len(copies):
        lone = len(copies) == 1
        said += (f", where {', '.join(copies['strategy'])} keep{'s' * lone} {'its' if lone else 'their'} gradients and "
                 f"a bucket copy of them{saved}")  # fmt: skip
    return said


def _bucket_copy(copies: pd.DataFrame) -> str:
    """' (32.1 MiB of buckets a rank: what the views save)': the copy's size, the buckets the rows recorded
    (`bucket_sizes_mb`, every launch's largest), which the held state leaves out, so the saving reads as a figure."""
    layouts = [layout for found in copies.get("bucket_layouts", ()) if found for layout in found]
    if not layouts:
        return ""
    return f" ({mib_text(max(sum(layout) for layout in layouts))} of buckets a rank: what the views save)"


def _mib(value: float) -> str:
    return f"{value / 1024:.2f} GiB" if value >= 1024 else f"{value:.0f} MiB"


CLOCK_SPREAD = 0.03
"""SM clocks further apart than this across a run's configurations make their steps not comparable as they stand."""


def gpu_work(rows: pd.DataFrame) -> str:
    """What the GPU section's table says (run_page.gpu_work_rows): how much of the GPU's peak the baseline reaches
    with nothing communicated (the model's own ceiling here), which configuration reaches least, and the SM
    clock's range where it moved. "" where the rows have neither MFU nor TFLOP/s."""
    figure = next((c for c in ("mfu", "achieved_tflops") if c in rows and rows[c].notna().any()), None)
    if figure is None:
        return ""
    text = (lambda v: f"{v:.1%} MFU") if figure == "mfu" else (lambda v: f"{v:.1f} TFLOP/s")
    known = rows[rows[figure].notna()]
    floor = known[known["baseline"]]
    lowest = known.loc[known[figure].idxmin()]
    sentences = []
    if not floor.empty:
        best = floor.loc[floor[figure].idxmax()]
        sentences.append(f"With nothing communicated ({best['configuration']}) the model reaches "
                         f"{text(best[figure])}: what this model, batch and precision get from the GPU before any "
                         "data parallelism")  # fmt: skip
    sentences.append(f"the least, {lowest['configuration']}, {text(lowest[figure])}")
    clocks = rows["sm_clock_mean_mhz"].dropna() if "sm_clock_mean_mhz" in rows else pd.Series(dtype=float)
    if len(clocks) and clocks.max() / clocks.min() - 1 > CLOCK_SPREAD:
        sentences.append(f"the SM clock ran at {clocks.min():.0f}–{clocks.max():.0f} MHz across configurations "
                         "(power or heat): their steps are not comparable as they stand")  # fmt: skip
    return "; ".join(sentences) + "."
