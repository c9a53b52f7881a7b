"""One sentence per configuration: what its cost over `local` is made of, the part that dominates, and
what to try, computed from its row's measured parts (harness.analysis.gap) and the run's other rows.

    stock at 2 ranks is 1.31× local's mean step, 4.2 ms longer, made up of 2.6 ms (62%) exposed communication (its
    last bucket, 15.2 of 27.3 MiB, is all-reduced after the last gradient: a smaller bucket_cap_mb would overlap
    more of it), 1.1 ms (25%) slower compute (2 ranks share 2 CPU cores with the communication threads), 0.5 ms
    (13%) the strategy's own work (…)

The parts (and the residual) add up to the gap. Each is said in ms; its share of the gap in brackets only where
no part is negative, so that the shares are of a whole they add up to (100 %). Where compute ran faster than the
baseline's, that part is said with its minus sign and what it offsets, and no part gets a share: a walkthrough
read '140 %' beside '−110 %' as an error, and shares past 100 % explain nothing.

Advice is given only where the run's own data supports it; a part under SMALL_PART of the gap gets
no words. Pure: rows in, text out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import gap, roles, stats
from harness.analysis.gap import SMALL_PART, UNTOLD_NEXT
from harness.analysis.stats import CONFIDENCE
from harness.results.values import counted

NEGLIGIBLE = 0.05
"""A gap under this share of the baseline's step is no cost worth explaining."""

PART_WORDS = {
    "gap_exposed_comm_ms": "exposed communication",
    "gap_waiting_ms": "waiting for the slowest rank",
    "gap_slower_compute_ms": "slower compute",
    "gap_rest_ms": "the strategy's own work",
}


def _get(row: Any, column: str) -> Any:
    value = row.get(column) if hasattr(row, "get") else None
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else value


def heading(rows: pd.DataFrame) -> str:
    """'why each is slower than local' where every row with a measured gap is slower (by NEGLIGIBLE of local's
    step, as `sentence` says 'slower'), else 'how each differs from local': a heading of the first kind once stood
    over 'runs faster than local (0.78× its mean step)' and a bar to −1000 ms."""
    timed = rows.dropna(subset=["gap_ms", "step_ms_mean"]) if {"gap_ms", "step_ms_mean"} <= set(rows) else rows[:0]
    slower = all(
        gap >= NEGLIGIBLE * (step - gap) for gap, step in zip(timed["gap_ms"], timed["step_ms_mean"], strict=True)
    )
    return f"{'why each is slower than' if slower else 'how each differs from'} {roles.baseline_name()}"


def largest_part(row: Any) -> str | None:
    """The part of the gap that dominates (a column of PART_WORDS), or None without a gap."""
    parts = {column: _get(row, column) for column in PART_WORDS}
    known = {column: value for column, value in parts.items() if value is not None}
    return max(known, key=known.get) if known and _get(row, "gap_ms") is not None else None


def offset_exposed_ms(row: Any) -> float | None:
    """The exposed communication (waiting included, as the console's row counts it) of a row that runs as fast as the
    baseline or faster though it is exposed: its other parts ran faster, so the two launches cannot tell what data
    parallelism costs it (`sentence` says so); None for any other row."""
    gap, step = _get(row, "gap_ms"), _get(row, "step_ms_mean")
    if gap is None or step is None or (local := step - gap) <= 0 or gap >= NEGLIGIBLE * local:
        return None
    exposed = (_get(row, "gap_exposed_comm_ms") or 0.0) + max(_get(row, "gap_waiting_ms") or 0.0, 0.0)
    return exposed if exposed >= NEGLIGIBLE * min(step, local) else None


def sentence(
    row: Any, run: pd.DataFrame | None = None, *, cores: int | None = None, confidence: float = CONFIDENCE
) -> str | None:
    """What `row`'s gap over the baseline is made of and what to try; None where it has no measured gap
    (world size 1, collectives not timed, no baseline). `run`: the run's rows (for what other strategies
    of the same setup achieved); `cores`: the CPU cores its ranks could use (where they share them); `confidence`:
    the run's verdicts', at which a smaller cap's lead over this one is said decided or open."""
    gap, step = _get(row, "gap_ms"), _get(row, "step_ms_mean")
    if gap is None or step is None:
        return None
    name = _strategy(row)
    local = step - gap
    repeat = _get(row, "repeat")
    several = run is not None and "repeat" in run and run["repeat"].nunique() > 1
    workloads = run is not None and "workload" in run and run["workload"].nunique() > 1
    head = (
        (f"{row['workload']}: " if workloads else "")
        + f"{name} at {int(row['world_size'])} ranks"
        + (f" (repeat {int(repeat) + 1})" if several and repeat is not None else "")  # from 1, as people count
    )
    if local <= 0 or gap < NEGLIGIBLE * local:
        if local <= 0:
            return None
        # Below the floor by more than the negligible share is not 'as fast': said as measured, not explained.
        pace = "as fast as" if gap > -NEGLIGIBLE * local else "faster than"
        if (exposed := offset_exposed_ms(row)) is not None:  # a cost measured, offset elsewhere: not 'nothing'
            return (f"{head} runs {pace} {roles.baseline_name()} ({step / local:.2f}× its mean step), though "
                    f"{exposed:.1f} ms a step is exposed communication (waiting for the slowest rank included): its "
                    f"other parts ran {exposed - gap:.1f} ms faster than {roles.baseline_name()}'s, so these two "
                    f"launches cannot tell what data parallelism costs it{UNTOLD_NEXT}")  # fmt: skip
        return f"{head} runs {pace} {roles.baseline_name()} ({step / local:.2f}×): data parallelism costs it " \
               "nothing measurable here"  # fmt: skip
    # Shares only of a whole they add up to: with any part negative (compute faster), the others' pass 100 %.
    shares = all((_get(row, column) or 0.0) >= 0 for column in (*PART_WORDS, "gap_residual_ms"))
    said = []
    for column, words in sorted(PART_WORDS.items(), key=lambda item: -(_get(row, item[0]) or 0.0)):
        value = _get(row, column) or 0.0
        if value >= SMALL_PART * gap:
            why = _advice(column, row, run, cores=cores, confidence=confidence)
            if column == "gap_exposed_comm_ms" and (_get(row, "gap_waiting_ms") or 0.0) >= SMALL_PART * gap:
                words += " besides the waiting"  # the console's 'exposed' holds both: these are its two parts
            said.append(f"{value:.1f} ms{_share(value, gap, shares)} {words}" + (f" ({why})" if why else ""))
    faster = -(_get(row, "gap_slower_compute_ms") or 0.0)
    if faster >= SMALL_PART * gap:
        turns = f" (its ranks take turns on the CPU cores, where {roles.baseline_name()}'s compute all at once)" \
            if _get(row, "device") == "cpu" else ""  # fmt: skip
        said.append(f"−{faster:.1f} ms where its compute ran faster than {roles.baseline_name()}'s{turns}")
    residual = _get(row, "gap_residual_ms") or 0.0
    if abs(residual) >= SMALL_PART * gap:  # named, never hidden: the parts above then add up to far from the gap
        signed = f"{residual:.1f}".replace("-", "−")  # the minus sign the faster compute's part carries
        said.append(f"{signed} ms{_share(residual, gap, shares)} outside the measured parts "
                    f"({roles.baseline_name()}'s own time beyond its compute, and the ranks' difference within a "
                    "step)")  # fmt: skip
    return f"{head} is {step / local:.2f}× {roles.baseline_name()}'s mean step, {gap:.1f} ms longer, made up of " + \
        ", ".join(said)  # fmt: skip


def _share(value: float, gap: float, shares: bool) -> str:
    """' (62%)': a part's share of the gap, where the parts are shares of it (none negative)."""
    return f" ({value / gap:.0%})" if shares else ""


def _strategy(row: Any) -> str:
    from harness.results.values import configuration_label

    return configuration_label(str(row["impl"]), _get(row, "impl_options"), grad_accum=_get(row, "grad_accum"))


def _advice(column: str, row: Any, run: pd.DataFrame | None, *, cores: int | None, confidence: float) -> str:
    if column == "gap_exposed_comm_ms":
        return _communication_advice(row, run, confidence)
    if column == "gap_waiting_ms":
        rank = _get(row, "slowest_rank")
        if rank is None and gap.unnamed_rank_words(row):
            return f"mostly rank {int(_get(row, 'last_rank'))}'s late launches, too few steps to name it slow"
        if rank is None:
            return "the ranks take turns launching late: their work per step is uneven"
        return f"rank {int(rank)} launches {_get(row, 'slowest_rank_late_ms'):.1f} ms late in " \
               f"{_get(row, 'slowest_rank_share'):.0%} of steps; the others wait for it"  # fmt: skip
    if column == "gap_slower_compute_ms":
        world, threads = int(row["world_size"]), _get(row, "threads_per_rank")
        if row.get("device") == "cpu" and cores and threads and world * threads >= cores:
            return f"{world} ranks share {counted(cores, 'CPU core')} with the communication threads"
        return "the strategy's hooks and copies into its buckets run inside the step"
    if column == "gap_rest_ms":
        return "outside compute and communication: copying buckets back, its optimizer wrapper"
    return ""


def _communication_advice(row: Any, run: pd.DataFrame | None, confidence: float = CONFIDENCE) -> str:
    """Why the communication is exposed, and what the run shows would hide more of it."""
    outside, mostly = _exposed_outside_backward(row)
    if mostly:
        return outside
    in_backward = _backward_advice(row, run, confidence)
    return "; ".join(words for words in (outside, in_backward) if words)


def _backward_advice(row: Any, run: pd.DataFrame | None, confidence: float = CONFIDENCE) -> str:
    """Why the gradients' communication in and after backward is exposed, and what would hide more of it."""
    hidden = _get(row, "overlap_efficiency") or 0.0
    better = _better_overlap(row, run)
    if bool(_get(row, "comm_after_backward")):
        tail = f": {better}" if better else ""
        return f"it communicates after backward by design, so nothing hides it{tail}"
    buckets = _get(row, "bucket_sizes_mb")
    if buckets is not None and len(buckets) and hidden < 0.5:
        sizes = [float(b) for b in buckets]
        tail = f"; {better}" if better else ""
        measured, alike = _smaller_cap_measured(row, run, confidence)
        cap = _get(row, "bucket_cap_mb")
        # DDP closes a bucket on the tensor that takes it to the cap: that tensor is more than the bucket less the
        # cap; where that exceeds the cap itself, no smaller cap splits it (a gpt2 bucket of 4.13 MiB at cap 1 was
        # its 4 MiB embedding and three small tensors, not 'one parameter')
        if cap is not None and sizes[-1] >= 2 * float(cap) * (1 + 1e-6):
            which = (
                "its one bucket" if len(sizes) == 1 else f"its last bucket, {_mib(sizes[-1])} of {_mib(sum(sizes))},"
            )
            return (f"{which} holds a gradient of more than {_mib(sizes[-1] - float(cap))}, larger than the "
                    f"bucket_cap_mb of {cap:g} (no cap splits a gradient), all-reduced after the last "
                    f"gradient{tail}")  # fmt: skip
        sent = _messages(row, sum(sizes))
        if len(sizes) == 1:
            advice = measured or f"a bucket_cap_mb below {_mib(sizes[0])} splits it, so that backward hides part{alike}"
            return f"its one bucket ({_mib(sizes[0])}{sent}) is all-reduced after the last gradient: {advice}{tail}"
        return (
            f"its last bucket, {_mib(sizes[-1])} of {_mib(sum(sizes))}{sent}, is all-reduced after the last "
            f"gradient: {measured or 'a smaller bucket_cap_mb would overlap more of it' + alike}{tail}"
        )
    comm, compute = _get(row, "comm_ms"), _get(row, "compute_ms")
    if hidden >= 0.5 and comm is not None and compute is not None and comm > compute:
        return f"it hides {hidden:.0%}, but its communication ({comm:.1f} ms) outlasts the compute that could hide it"
    return better


def _exposed_outside_backward(row: Any) -> tuple[str, bool]:
    """Each phase outside backward that holds SMALL_PART or more of the exposed communication (measured per
    step: overlap.step_communication), said with its collective and what the strategy offers against it, and
    whether the two together hold most of it; ('', False) where the gradients' collectives in and after
    backward hold nearly all (the bucket advice alone then)."""
    exposed = _get(row, "exposed_comm_ms") or 0.0
    parts = {phase: _get(row, f"exposed_{phase}_ms") or 0.0 for phase in ("optimizer", "forward")}
    if exposed <= 0:
        return "", False
    said = [_outside_words(row, phase, part, exposed) for phase, part in sorted(parts.items(), key=lambda p: -p[1])
            if part >= SMALL_PART * exposed]  # fmt: skip
    return "; ".join(said), sum(parts.values()) >= 0.5 * exposed


def _outside_words(row: Any, phase: str, part: float, exposed: float) -> str:
    impl, options = str(row["impl"]), _get(row, "impl_options")
    declared = roles.declared(impl)
    if phase == "optimizer":  # a sharded optimizer's broadcast (zero's is the one timed there)
        broadcasts = declared["shards_state"] and declared["gradient_traffic"] == "allreduce"
        what = ("the broadcast of the parameters each rank updated, after its optimizer step" if broadcasts else
                "the collectives of its optimizer step")  # fmt: skip
        offers = [("parameters_as_bucket_view", True, "sends it as one broadcast a rank, not one a parameter")]
        # torch's overlap_with_ddp runs over NCCL only, and refuses parameters_as_bucket_view (impls/zero.py)
        if _get(row, "backend") == "nccl" and not roles.option_left_at(impl, "parameters_as_bucket_view", options):
            offers.append(("overlap_with_ddp", True, "runs each rank's step inside backward, overlapping it"))
    else:
        what = ("the all-gathers of parameters in forward" if declared["gradient_traffic"] == "sharded" else
                "the broadcast of buffers before each forward")  # fmt: skip
        offers = [("broadcast_buffers", False, "skips it where each rank may keep its own BatchNorm statistics")]
    tries = [f"{name}={str(value).lower()} {effect}" for name, value, effect in offers
             if roles.option_left_at(impl, name, options) not in (None, value)]  # fmt: skip
    advice = f": {' or '.join(tries)}" if tries else ""
    # Of the row's exposed_comm_ms, which holds the waiting for the slowest rank: said, since the sentence's gap part
    # beside it ('… exposed communication besides the waiting') is the other base. That is the mean of the ranks, where
    # the gap's waiting is the rank that waited most: a resnet50 line read '57.6 ms waiting' beside '5.2 of 41.9 ms a
    # step' (ranks of 14.4 and 69.5 ms), unnamed, and in a bracket inside the sentence's own.
    return (f"{part / exposed:.0%} of all exposed communication, waiting included, {part:.1f} of {exposed:.1f} ms a "
            f"step as the ranks' mean, is {what}, which nothing hides{advice}")  # fmt: skip


def _smaller_cap_measured(row: Any, run: pd.DataFrame | None, confidence: float = CONFIDENCE) -> tuple[str, str]:
    """What the run measured at the smaller caps of this strategy, setup and world size, where it measured
    any (the advice to lower the cap, not what its own sweep found, contradicted a sweep that found 1 MiB no
    faster): (the fastest of those that made other buckets against this cap's point as the sweep judges it (caps
    that made its buckets pooled, launch by launch: layouts.layout_points), decided or open at `confidence` with its
    interval, as the sweep's verdict says it; a note naming the smaller caps that made this cap's buckets). A gpt2
    sweep's line once said '34.5% faster' as fact of 2 repeats, against cap 100 alone, where the verdict, open,
    pooled 25 and 100."""
    from harness.analysis.verdicts import cap_verdict, layouts
    from harness.analysis.verdicts.sweep import other_options, ratio_interval_text

    cap = _get(row, "bucket_cap_mb")
    if run is None or cap is None or "bucket_cap_mb" not in run or "step_ms_median" not in run:
        return "", ""
    options = run["impl_options"].map(other_options) if "impl_options" in run else pd.Series("{}", index=run.index)
    same = run[(run["status"] == "ok") & (options == other_options(_get(row, "impl_options")))]
    for key in (k for k in SAME_CONFIGURATION if k != "impl_options" and k in run and _get(row, k) is not None):
        same = same[same[key] == row[key]]  # the same strategy, options, setup and world size; any cap
    same = same.dropna(subset=["step_ms_median"])
    if cap not in set(same["bucket_cap_mb"]):
        return "", ""
    alike = [c for c in _caps_laid_out_as(same, _get(row, "bucket_sizes_mb")) if c < cap]
    note = f" (the smaller bucket_cap_mb={','.join(f'{c:g}' for c in alike)} made the same buckets here)" if alike \
        else ""  # fmt: skip
    sizes = same["bucket_sizes_mb"] if "bucket_sizes_mb" in same else pd.Series(None, index=same.index)
    repeats = same["repeat"] if "repeat" in same else pd.Series(None, index=same.index)
    launches = {
        c: [
            (None if pd.isna(r) else int(r), float(ms), z)
            for r, ms, z in zip(repeats[g.index], g["step_ms_median"], sizes[g.index], strict=True)
        ]
        for c, g in same.groupby("bucket_cap_mb")
    }
    points = layouts.layout_points(launches)
    mine = next(point for point in points if cap in point.caps)
    smaller = [p for p in points if p is not mine and max(p.caps) < cap]
    if not smaller:
        return "", note
    best = min(smaller, key=lambda point: stats.geometric_mean(point.medians))
    aligned = all(None not in p.repeats for p in (mine, best)) and stats.same_launches(mine.repeats, best.repeats)
    judged = cap_verdict.cap_pair_verdict(mine.medians, best.medians, aligned=aligned,
                                          threshold=stats.DEFAULT_THRESHOLD, confidence=confidence)  # fmt: skip
    here = stats.geometric_mean(mine.medians)
    pooled = f" at bucket_cap_mb={','.join(f'{c:g}' for c in mine.caps)}, one layout" if len(mine.caps) > 1 else \
        " here"  # fmt: skip
    ratio = judged["ratio"]
    pace = "as fast" if abs(1 - ratio) < 0.005 else f"{abs(1 - ratio):.1%} {'faster' if ratio < 1 else 'slower'}"
    measured = (f"this run measured the smaller bucket_cap_mb={best.cap:g} at {stats.geometric_mean(best.medians):.1f} "
                f"ms a step against {here:.1f}{pooled}")  # fmt: skip
    if judged["verdict"] == stats.TOO_FEW:  # as the sweep's verdict says it: open, with its interval
        interval = ratio_interval_text(judged["low"], judged["high"]) if np.isfinite(judged["low"]) else ""
        bounds = f", {confidence * 100:.3g}% interval {interval}" if interval else ""
        return f"{measured}, {pace} so far: open{bounds}; geometric means over repeats", ""
    said = "no significant change" if judged["verdict"] == stats.NO_CHANGE else "decided"
    return f"{measured}: {pace}, {said}; geometric means over repeats", ""


def _caps_laid_out_as(rows: pd.DataFrame, sizes: Any) -> list[float]:
    """The caps whose every launch made the bucket layout `sizes` (this row's): their steps measure the same
    buckets, so a difference between them is the launches' noise, not the cap (the sweep calls them flat)."""
    from harness.analysis.verdicts.sweep import bucket_layouts

    mine = bucket_layouts([sizes])
    if mine is None or "bucket_sizes_mb" not in rows:
        return []
    return [cap for cap, group in rows.groupby("bucket_cap_mb") if bucket_layouts(group["bucket_sizes_mb"]) == mine]


def _messages(row: Any, buckets_mb: float) -> str:
    """'; its messages 8.09 MiB a step' where the bucket timeline measured a step's collectives' messages well under
    its buckets (a compression hook: bf16's 8.1 MiB of a 16.2 MiB bucket read as 16.2 travelling); '' elsewhere."""
    sent = _get(row, "comm_bytes")
    if sent is None or sent != sent or sent / 2**20 > 0.95 * buckets_mb:
        return ""
    return f"; its messages {_mib(sent / 2**20)} a step"


def _mib(value: float) -> str:
    if value >= 100:
        return f"{value:.0f} MiB"
    return f"{value:.3g} MiB" if value >= 0.1 else f"{value * 1024:.0f} KiB"  # as the sweep's verdict says them


def _better_overlap(row: Any, run: pd.DataFrame | None) -> str:
    """'bucketed hides 42 % of its communication in this run': the strategy of the same setup and world size
    that hid the most over its repeats (1 − Σ not hidden / Σ in flight, the answer's figure, not its best
    repeat's), where that is more than this one."""
    if run is None or run.empty or "overlap_efficiency" not in run:
        return ""
    same = run[(run["workload"] == row["workload"]) & (run["world_size"] == row["world_size"])
               & (run["status"] == "ok") & (run["impl"] != row["impl"])]  # fmt: skip
    same = same.dropna(subset=["overlap_efficiency"])
    if same.empty:
        return ""
    hidden = same.groupby(["impl", "impl_options"], sort=False).apply(_pooled_overlap, include_groups=False)
    (impl, options), best = hidden.idxmax(), hidden.max()
    if best <= (_get(row, "overlap_efficiency") or 0.0) + 0.1:
        return ""
    return f"{_strategy({'impl': impl, 'impl_options': options})} hides {best:.0%} of its communication in this run"


def _pooled_overlap(repeats: pd.DataFrame) -> float:
    """A strategy's share of communication hidden over its repeats: 1 − Σ not hidden / Σ in flight (per-step
    means); the median repeat's share where the run has no communication times."""
    if {"comm_ms", "exposed_comm_ms"} <= set(repeats) and repeats["comm_ms"].notna().all() and repeats["comm_ms"].sum():
        return float(1 - repeats["exposed_comm_ms"].sum() / repeats["comm_ms"].sum())
    return float(repeats["overlap_efficiency"].median())


def lines(
    row: Any, run: pd.DataFrame | None = None, *, cores: int | None = None, confidence: float = CONFIDENCE
) -> list[str]:
    """What the console and the run page say of `row`: its sentence, and its slow rank on a line of its own
    where the sentence does not name it already (its waiting part too small to be said), or why none is named."""
    said, slow = sentence(row, run, cores=cores, confidence=confidence), gap.slow_rank_words(row)
    rank = _get(row, "slowest_rank")  # none named: the line says how near one came (gap.unnamed_rank_words)
    named = slow is not None and said is not None and rank is not None and f"rank {int(rank)} " in said
    return [line for line in (said, f"{_strategy(row)}: {slow}" if slow and not named else None) if line]


SAME_CONFIGURATION = ("impl", "impl_options", "workload", "size", "batch_size", "grad_accum", "dtype", "optimizer",
                      "world_size", "nnodes")  # fmt: skip


def typical_repeats(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: of its repeats, the one whose median step is the median of theirs (the
    lower middle of an even count, as every per-configuration figure of a run page picks it), so that a run
    of 16 repeats says one sentence per configuration, not 16, and the sentence describes the launch the
    charts beside it draw (picked by gap, two repeats gave the flattering one, the charts the other); and
    every repeat where a slow rank was named (a finding of its own). Rows without a gap are left out."""
    with_gap = rows[rows["gap_ms"].notna()]
    if with_gap.empty or "repeat" not in rows or with_gap["repeat"].nunique() <= 1:
        return with_gap
    keys = [key for key in SAME_CONFIGURATION if key in rows]
    by = "step_ms_median" if "step_ms_median" in rows else "gap_ms"
    timed = rows[rows[by].notna() & ((rows["status"] == "ok") if "status" in rows else True)]
    picked = set()
    for _, group in timed.sort_values([by, "repeat"], kind="stable").groupby(keys, dropna=False, sort=False):
        chart = group.index[(len(group) - 1) // 2]  # the charts' launch, among every ok timed repeat
        said = group[group["gap_ms"].notna()]
        picked |= {chart} if chart in said.index else ({said.index[(len(said) - 1) // 2]} if len(said) else set())
    if "slowest_rank" in with_gap:
        picked |= set(with_gap.index[with_gap["slowest_rank"].notna()])
    return rows.loc[sorted(picked)]
