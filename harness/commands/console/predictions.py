"""What `collectives` and `predict` print: the collectives' table, the model's step per bucket cap against
what a run measured, and NCCL's choices on a cluster. Written through the terminal's `say`
(harness.commands.console), so that a closed reader or a pipe is handled as everywhere else."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.analysis import agreement, predicted_why, stats
from harness.commands.console import bytes_text, invoked, once, say, say_once, warning
from harness.commands.console.predict.steps import best_cap
from harness.perfmodel.pick import ranked
from harness.results.values import counted, ms_text

if TYPE_CHECKING:
    import pandas as pd


# --- collectives --------------------------------------------------------------------------------


def collectives_table(frame: pd.DataFrame, contention: pd.DataFrame) -> None:
    """Per world size and collective: bus bandwidth at the largest size, the peak, and correctness;
    then how much compute and all-reduce slow each other down when they overlap."""
    for (world, op), rows in frame.groupby(["world_size", "op"], sort=True):
        best = rows.loc[rows["busbw_gbps"].idxmax()]
        largest = rows.loc[rows["bytes"].idxmax()]
        wrong = ", ".join(bytes_text(b) for b in rows.loc[~rows["correct"], "bytes"])
        verdict = f"WRONG RESULTS at {wrong}" if wrong else "all correct"
        say(f"  w{world} {op:<14} busbw {largest['busbw_gbps']:.3f} GB/s at {bytes_text(largest['bytes'])} "
            f"(peak {best['busbw_gbps']:.3f} at {bytes_text(best['bytes'])}); {verdict}")  # fmt: skip
    for row in contention.itertuples():
        compute = f"compute {row.compute_slowdown:.2f}× slower"
        at_least = getattr(row, "compute_slowdown_at_least", None)  # null (None, NaN): a run from before it was kept
        if at_least is not None and at_least == at_least and bool(at_least):  # its denominator was within noise
            bound = f": at least {row.compute_slowdown:.2f}×" if row.compute_slowdown > 1.005 else ""
            compute = ("compute's slowdown while an all-reduce is in flight not measured (the compute burst's own "
                       f"spread alone is as long as the compute it did during the all-reduce{bound})")  # fmt: skip
        say(f"  w{row.world_size} overlap: {compute}, all-reduce {row.comm_slowdown:.2f}× (4 KiB: "
            f"{row.latency_slowdown:.2f}×) slower while the other runs")  # fmt: skip


# --- predict ------------------------------------------------------------------------------------


def predict_profile(setup: dict, profile, source: str, alike: str = "") -> None:
    """The profile predict rests on; `alike`: where a smaller size's stands for the full size's gradients, said so."""
    say(f"ddpbench predict: {setup['workload']}/{setup['size']}, batch {setup['batch_size']} per rank; {source}: "
          f"forward {profile.forward_s * 1e3:.2f} ms, backward {profile.backward_s * 1e3:.2f} ms, optimizer "
          f"{profile.optimizer_s * 1e3:.2f} ms, {profile.grad_bytes / 2**20:.2f} MiB of gradients "
          f"in {len(profile.grads)} tensors{alike}")  # fmt: skip


def contention_text(contention) -> str:
    if contention is None:
        return "contention: not measured"
    latency = f" (latency ×{contention.latency_slowdown:.2f})" if contention.latency_slowdown else ""
    return (f"contention: compute ×{contention.compute_slowdown:.2f}, all-reduce ×{contention.comm_slowdown:.2f}"
            f"{latency} while overlapped")  # fmt: skip


def predict_table(frame: pd.DataFrame, *, world: int, link, contention) -> None:
    """The network at this world size, then one row per bucket cap and the predicted best (caps within
    agreement.TIE_TOLERANCE of the fastest are tied). `contention` None: none was measured."""
    fitted = "fitted (α + bytes / busbw) to " if link.source.startswith("collectives run") else ""
    busbw = (f"busbw {link.busbw_bytes_per_s / 1e9:.3f} GB/s" if math.isfinite(link.busbw_bytes_per_s)
             else "no bandwidth term (the times did not grow with size: measure larger sizes)")  # fmt: skip
    say(f"w{world}: all-reduce α {link.alpha_s * 1e6:.1f} µs, {busbw} ({fitted}{link.source}); "
        f"{contention_text(contention)}")  # fmt: skip
    _cap_rows(frame, decimals=2)
    best_cap(frame, world=world, decimals=2)


def _cap_rows(frame: pd.DataFrame, *, decimals: int) -> None:
    say(f"  {'cap MiB':>8} {'buckets':>8} {'predicted step ms':>18} {'exposed comm ms':>16} {'scaling eff.':>13}")
    for r in frame.itertuples():
        say(f"  {r.bucket_cap_mb:>8g} {r.buckets:>8} {r.step_ms:>18.{decimals}f} "
            f"{r.exposed_comm_ms:>16.{decimals}f} {r.scaling_efficiency:>13.3f}")  # fmt: skip


def no_validation() -> None:
    say("validation: this run has no stock bucket-cap sweep at world size ≥ 2 to check DDP's schedule against")


def validation(key: tuple, group: pd.DataFrame, as_good: list[float] | None, errors: list[tuple[str, dict]]) -> None:
    """One (workload, size, world size) of a run: measured against predicted per cap, the caps the
    sweep found as good as the best, and each model variant's error."""
    import pandas as pd

    workload, size, world = key
    strategy = f" {group['impl'].iloc[0]}" if "impl" in group else ""
    say(f"validation w{world} {workload}/{size}{strategy}, measured in the run (geometric mean of repeats) against "
        f"predicted (raw / raw + contention / calibrated / calibrated + contention):")  # fmt: skip
    for r in group.itertuples():
        variants = (r.predicted_raw_ms, getattr(r, "predicted_raw_contention_ms", None), r.predicted_ms,
                    r.predicted_contention_ms)  # fmt: skip
        predicted = " / ".join("—" if pd.isna(v) else f"{v:.2f}" for v in variants)
        say(f"  cap {r.bucket_cap_mb:g} MiB: measured {r.measured_ms:.2f} ms, predicted {predicted} ms "
              f"(compute ×{r.compute_scale:.2f}, DDP's own {r.reducer_ms:.1f} ms)")  # fmt: skip
    if as_good is not None:
        say(f"  measured caps the best does not beat by {stats.DEFAULT_THRESHOLD:.0%} over repeats: "
              f"{', '.join(f'{c:g}' for c in as_good)} MiB")  # fmt: skip
    vacuous = agreement.tells_no_cap_apart(group["bucket_cap_mb"], as_good)
    for label, error in errors:
        apart = error["best_cap_grid_steps"]
        said = ("no check of the best cap: the sweep calls every cap as good" if vacuous else "agrees" if apart == 0
                else "agrees: a cap the sweep calls as good" if agreement.agrees(error, as_good)
                else f"{counted(apart, 'grid step')} apart")  # fmt: skip
        measured, predicted = (
            agreement.caps_text(error[key]) for key in ("best_measured_caps_mb", "best_predicted_caps_mb")
        )
        say(f"  {label}: MAPE {error['mape']:.1%}, best cap measured {measured} vs predicted {predicted} ({said})")


def zero_validation(checks: list[dict]) -> None:
    """Each ZeRO-1 configuration of a run (zero.run_checks' rows): measured against predicted, with its parts."""
    from harness.perfmodel import sharded

    for c in checks:
        error = c["predicted_ms"] / c["measured_ms"] - 1
        sent = sharded.broadcasts_priced(c["broadcast_source"], c["network"])
        say(f"validation w{c['world_size']} {c['workload']}/{c['size']} {c['impl']} ({c['bucket_cap_mb']:g} MiB), "
            f"measured in the run (geometric mean of repeats) against predicted (calibrated, with measured "
            f"contention): measured {c['measured_ms']:.2f} ms, predicted {c['predicted_ms']:.2f} ms ({error:+.1%}): "
            f"{zero_parts(c, ddp_ms=c['ddp_ms'], optimizer_ms=c['whole_optimizer_ms'])}; {sent}")  # fmt: skip


def fsdp_validation(checks: list[dict]) -> None:
    """Each FSDP configuration of a run (fsdp.run_checks' rows): measured against predicted, with its parts."""
    from harness.perfmodel import sharded
    from harness.results.values import configuration_label

    for c in checks:
        error = c["predicted_ms"] / c["measured_ms"] - 1
        fitted = sharded.collectives_priced(c["gather_source"], c["scatter_source"], c["network"])
        strategy = configuration_label(c["impl"], c["impl_options"])
        say(f"validation w{c['world_size']} {c['workload']}/{c['size']} {strategy}, measured in "
            f"the run (geometric mean of repeats) against predicted (scaled to the one-rank baseline"
            f"{', every call blocking on the CPU' if c['blocking'] else ''}): measured {c['measured_ms']:.2f} ms, "
            f"predicted {c['predicted_ms']:.2f} ms ({error:+.1%}): compute {ms_text(c['compute_ms'])} ms, "
            f"{int(c['fsdp_gathers'])} gathers {ms_text(c['fsdp_gather_ms'])} ms and reduce-scatters "
            f"{ms_text(c['fsdp_scatter_ms'])} ms ({ms_text(c['fsdp_exposed_ms'])} ms of them exposed), the "
            f"optimizer on 1/{c['world_size']} {ms_text(c['fsdp_optimizer_ms'])} ms, FSDP's own cost at one rank "
            f"{ms_text(c['fsdp_own_ms'])} ms; {fitted}")  # fmt: skip


def zero_parts(row, *, ddp_ms: float, optimizer_ms: float) -> str:
    """A predicted ZeRO-1 step's parts (its zero_* columns: a check's or a cluster row's) against DDP's step."""
    view = "parameters_as_bucket_view" in str(row.get("impl_options", ""))
    return (f"DDP's step {ddp_ms:.4g} ms with its optimizer {ms_text(optimizer_ms)} ms → "
            f"{ms_text(row['zero_optimizer_ms'])} ms on the rank that owns {row['zero_largest_share']:.1%} of the "
            f"elements, + {ms_text(row['zero_broadcast_ms'])} ms in {int(row['zero_broadcasts'])} broadcasts "
            f"({'one a rank' if view else 'one a parameter'})")  # fmt: skip


# --- predict on a cluster -------------------------------------------------------------------------


POOR_FIT = 0.25
"""A fit whose mean busbw error on the logs' rows passes this describes them no better than a guess."""


BUCKET_SIZES = (2**20, 256 * 2**20)
"""The message sizes DDP's buckets take at caps of 1 to 256 MiB: where a fit's error moves a step."""


def _bucket_sizes_error(errors) -> str:
    """'; on the 18 rows of 1–256 MiB, DDP's bucket sizes: mean 3.1%, worst −16.0% (16 MiB)': the overall worst can
    sit at 64 KiB, where no bucket is, and hide a miss where the buckets are."""
    low, high = BUCKET_SIZES
    buckets = [e for e in errors if low <= e[1] <= high]
    if not buckets:
        return ""
    worst = max(buckets, key=lambda e: abs(e[2]))
    mean = sum(abs(e[2]) for e in buckets) / len(buckets)
    return (
        f"; on the {len(buckets)} rows of 1–256 MiB, DDP's bucket sizes: mean {mean:.1%}, worst {worst[2]:+.1%} "
        f"({worst[1] / 2**20:g} MiB in {worst[0]})"
    )


def nccl_fit(fit, logs, base, *, reach: str = "") -> None:
    """What the fit read, what it moved from `base`'s values (and held: no row limited by it), and its error.
    `reach`: why rows across nodes sit above anything the model reaches (nccltests_fit.reach_text), said in place of
    the generic causes of a poor fit."""
    for log in logs:
        say(f"ddpbench predict: nccl-tests log {log.path}: {log.collective}, {log.ranks} ranks on "
              f"{counted(log.nodes, 'node')}, {len(log.rows)} rows")  # fmt: skip

    def held(field: str) -> str:
        capped = reach and field.startswith("inter") and "the node's ring bounds every row across nodes, below"
        return f" held (no row limited by it{': ' + capped if capped else ''})"

    moved = ", ".join(f"{field} {getattr(base, field):.4g}{held(field) if field in fit.held else f' → {value:.4g}'}"
                      for field, value in fit.fitted.items())  # fmt: skip
    worst = max(fit.errors, key=lambda e: abs(e[2]))
    size = f"{worst[1] / 2**20:g} MiB" if worst[1] >= 2**20 else f"{worst[1] / 2**10:g} KiB"
    buckets = _bucket_sizes_error(fit.errors)
    say(f"ddpbench predict: fitted {moved}; busbw error on the {len(fit.errors)} rows ≥ 64 KiB: mean "
          f"{fit.mean_abs:.1%}, worst {worst[2]:+.1%} ({size} in {worst[0]}){buckets}")  # fmt: skip
    if reach:  # the cause known: the model's bound across nodes, not the logs
        warning(reach)
    elif fit.mean_abs > POOR_FIT:  # no level of the profile reproduces the logs: what usually causes it
        warning(f"the fit does not describe these logs (mean busbw error {fit.mean_abs:.1%}): check their units "
                "(GB/s), the node count each says (its '# Rank' lines name the hosts) and that their GPU is the "
                "profile's; every prediction below rests on this fit")  # fmt: skip


def cluster_collectives(cluster, choices) -> None:
    """One node count's predictions as nccl-tests prints its table, with NCCL's algorithm and protocol."""
    first = choices[0]
    say(f"# {cluster.name}: {first.collective} on {first.nodes} node(s) × {cluster.gpus_per_node} GPUs = "
          f"{first.ranks} ranks (predicted: NCCL's algorithms on the profile's bandwidths)")  # fmt: skip
    say(f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'time':>9s}  {'algbw':>7s}  {'busbw':>7s}  "
          "algorithm  protocol")  # fmt: skip
    say(f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'(us)':>9s}  {'(GB/s)':>7s}  {'(GB/s)':>7s}")
    for c in choices:
        say(f"{c.nbytes:12d}  {c.nbytes // 4:12d}  {'float':>8s}  {c.time_us:9.2f}  {c.algbw_gbps:7.2f}  "
              f"{c.busbw_gbps:7.2f}  {c.algorithm:<9s}  {c.protocol}")  # fmt: skip


def cluster_answer(cluster, frames: list[pd.DataFrame], *, backward_ms: float, caveat: str = "",
                   own_ms: float | None = 0.0, full_size: str = "",
                   small: str = "the benched model") -> None:  # fmt: skip
    """The answer over every node count, last, where it is read: the cap to use (its best, or where it changes
    with the world size), the step and scaling efficiency from the fewest GPUs to the most, and why the step
    costs what it does at the most GPUs (the named cap's predicted parts: DDP's default where it ties), in one
    line; `own_ms`, DDP's own cost in the prediction, is named where it costs more than what is exposed (None: not in
    it, and the figures say they are before it). `full_size`: where the full size's floors bind, its answer
    (predict_full_size.full_size_lead), said first, the small profile's (`small`: whose) after it, said so, without
    the cap the fastest cap's line under the table gave it."""
    answers = [agreement.cap_answer(frame["bucket_cap_mb"], frame["step_ms"]) for frame in frames]
    named = [frame.iloc[answer.index] for frame, answer in zip(frames, answers, strict=True)]
    changes = [(int(row["world_size"]), answer.text) for row, answer in zip(named, answers, strict=True)]
    merged = [change for k, change in enumerate(changes) if k == 0 or change[1] != changes[k - 1][1]]
    cap_text = merged[0][1] if len(merged) == 1 else "; ".join(f"{text} from w{world}" for world, text in merged)
    if cap_text.startswith("any") and (alike := predicted_why.one_bucket_at_every_cap(frames)):
        cap_text = f"{cap_text.removesuffix(')')}: {alike})"
    first, last = named[0], named[-1]
    before = ", both before DDP's own cost" if own_ms is None else ""  # neither measured nor given: not in them
    span = (f"w{int(first['world_size'])} to w{int(last['world_size'])}: step {first['step_ms']:.4g} → "
            f"{last['step_ms']:.4g} ms, scaling efficiency {first['scaling_efficiency']:.3f} → "
            f"{last['scaling_efficiency']:.3f}{before}")  # fmt: skip
    if len(named) == 1:
        span = f"at w{int(last['world_size'])}: step {last['step_ms']:.4g} ms, scaling efficiency " \
               f"{last['scaling_efficiency']:.3f}{before}"  # fmt: skip
    caveats = [caveat] if caveat else []
    if any(answer.unproven for answer in answers):
        caveats.append(agreement.SMALL_CAP_CAVEAT)
    said = "".join(f" [{text}]" for text in caveats)
    # after the full size's why, which names backward's ms: the small size's says only what differs
    why_last = predicted_why.predicted_step(
        last, backward_ms=backward_ms, own_ms=own_ms or 0.0, backward_said=bool(full_size)
    )
    own = f"{span}. Why at w{int(last['world_size'])}: {why_last}{ranked.algorithm_changes(named, 'comm_algorithm')}"
    head = f"ddpbench predict: answer for DDP on {cluster.name} (ZeRO-1's and FSDP2's steps follow): "
    if full_size:  # the model to train's first, a line of its own; the small profile's (its own buckets) under it,
        say(f"{head}{full_size}")  # without its cap: the fastest cap's line under the table said it
        say(f"ddpbench predict:   for {small}: {own}{said}")
        return
    own = f"bucket_cap_mb {cap_text}; {own}"
    say(f"{head}{own}{said}")


BUCKET_VIEW_WORTH = ranked.BUCKET_VIEW_WORTH
CLUSTER_BROADCASTS = "broadcasts priced as NCCL all-gathers"
CLUSTER_SHARDED = (
    f"{ranked.CLUSTER_SHARDED}, the gathers in fp32 (FSDP2's default; --opt param_dtype=bf16 would halve their bytes)"
)
"""The console's words for how a cluster's collectives are priced; the what-if page's in full (ranked's: the
all-gathers carry as many bytes a link, the profile holding no broadcast). FSDP2's gathers carry the parameters as
bench holds them, fp32, which its default param_dtype leaves uncast: a bf16 team's param_dtype=bf16 casts each shard
before its all-gather (reduce-scatters stay in reduce_dtype, fp32), which the model does not price
(perfmodel.sharding.fsdp)."""


def zero_answer(
    frames: list[pd.DataFrame],
    *,
    optimizer_ms: float,
    largest: tuple[str, float],
    caveat: str = "",
    priced: str = CLUSTER_BROADCASTS,
) -> None:
    """ZeRO-1's predicted step at each GPU count, at the cap DDP's answer names there (`cluster_answer`), and why:
    the optimizer on the largest shard (`largest`: the largest parameter's name and share of the elements, where
    it alone bounds the shard), the broadcasts after it (`priced`: on what); parameters_as_bucket_view where it
    sends faster."""
    from harness.perfmodel.sharding.zero import own_cost_words

    rows = [agreement.answer_row(frame) for frame in frames]
    steps = ", ".join(f"w{int(r['world_size'])} {r['zero_step_ms']:.4g} ms" for r in rows)
    ddp = ", ".join(f"{r['step_ms']:.4g}" for r in rows)
    first, last = rows[0], rows[-1]
    name, share = largest
    alone = name is not None and math.isclose(last["zero_largest_share"], share, rel_tol=1e-6)
    bound = f"; its largest parameter, {name or 'one tensor'}, alone holds {share:.1%}: more ranks cannot shrink it"
    bound = bound if alone else ""
    span = f" (w{int(first['world_size'])} → w{int(last['world_size'])})" if len(rows) > 1 else ""
    sent = f"{ms_text(first['zero_broadcast_ms'])} → " * (len(rows) > 1) + f"{ms_text(last['zero_broadcast_ms'])}"
    worth = [r for r in rows if r["zero_bucket_view_broadcast_ms"] < BUCKET_VIEW_WORTH * r["zero_broadcast_ms"]]
    packed = ", ".join(f"{ms_text(r['zero_bucket_view_broadcast_ms'])} ms at w{int(r['world_size'])}" for r in worth)
    packed = f"; parameters_as_bucket_view=true, one broadcast a rank, would take {packed}" if worth else ""
    full = last.get("zero_full_size_broadcast_ms", float("nan"))  # the floors': the model you will train's
    whose = "" if full != full else (f" (the profiled model's; at w{int(last['world_size'])} the full size's "
                                     f"optimizer shard takes {ms_text(last['zero_full_size_optimizer_ms'])} ms, its "
                                     f"broadcasts {ms_text(full)} ms)")  # fmt: skip
    say(
        f"ddpbench predict: and ZeRO-1 (DDP + torch's ZeroRedundancyOptimizer, its defaults) at the caps above: "
        f"{steps} (DDP's {ddp} ms). Why{whose}: its optimizer steps the largest shard, "
        f"{last['zero_largest_share']:.1%} of "
        f"the elements at w{int(last['world_size'])} ({ms_text(optimizer_ms)} → "
        f"{ms_text(last['zero_optimizer_ms'])} ms{bound}), "
        f"then each rank broadcasts what it updated, overlapping nothing: {int(last['zero_broadcasts'])} broadcasts"
        f"{ranked.run_as(last, 'zero_broadcast_algorithms')}, one a parameter, take {sent} ms{span}"
        f"{ranked.algorithm_changes(rows, 'zero_broadcast_algorithm', what='they')}{packed}{own_cost_words(last)}"
        f"{_bracketed(priced, caveat)}"
    )


def fsdp_answer(frames: list[pd.DataFrame], *, caveat: str = "", priced: str = CLUSTER_SHARDED) -> None:
    """FSDP2's predicted step at each GPU count (its fsdp_* columns, the same at every cap), and why: each unit's
    gathers and reduce-scatter (`priced`: on what), what compute did not hide of them, its optimizer on 1/n, its
    own cost."""
    rows = [agreement.answer_row(frame) for frame in frames]
    last = rows[-1]
    if math.isnan(last["fsdp_step_ms"]):
        say(
            "ddpbench predict: FSDP2's step is not modelled for this profile: no block of it holds a trained "
            "parameter with forward timed block by block (a profile stored before ddpbench timed it: `ddpbench "
            "bench --profile` does; or a model without blocks, which FSDP shards as one unit)"
        )
        return
    steps = ", ".join(f"w{int(r['world_size'])} {r['fsdp_step_ms']:.4g} ms" for r in rows)
    ddp = ", ".join(f"{r['step_ms']:.4g}" for r in rows)
    own = f"; FSDP's own cost at one rank, {ms_text(last['fsdp_own_ms'])} ms, added" if last["fsdp_own_ms"] > 0 else ""
    say(
        f"ddpbench predict: and FSDP2 (fully_shard on each block and the root, its defaults): {steps} (DDP's {ddp} "
        f"ms at the caps above). Why: each block is "
        f"all-gathered before its forward and again before its backward, the root once ({int(last['fsdp_gathers'])} "
        f"gathers a step over {int(last['fsdp_units'])} units), each reduce-scattered after its backward; at "
        f"w{int(last['world_size'])} the gathers{ranked.run_as(last, 'fsdp_gather_algorithms')} take "
        f"{ms_text(last['fsdp_gather_ms'])} ms and the reduce-scatters{ranked.run_as(last, 'fsdp_scatter_algorithms')} "
        f"{ms_text(last['fsdp_scatter_ms'])} ms, of which {ms_text(last['fsdp_exposed_ms'])} ms are not hidden behind "
        f"compute{ranked.fsdp_changes(rows, full_size=False)}; its optimizer steps 1/{int(last['world_size'])} of "
        f"every parameter ({ms_text(last['fsdp_optimizer_ms'])} ms){own}{_bracketed(priced, caveat)}"
    )


def _bracketed(priced: str, caveat: str) -> str:
    """' [what it is priced on; caveat]', said with the first cluster's answer alone where several are (`once`)."""
    said = once(f"{priced}{'; ' + caveat if caveat else ''}")
    return f" [{said}]" if said else ""


def labelled(state: pd.DataFrame) -> pd.DataFrame:
    """Model-state rows with the `strategy` each line names them by (its options too, as the pages name it)."""
    from harness.results.values import strategy_labels

    return state.assign(strategy=strategy_labels(state)) if not state.empty else state


def strategy_choice(state: pd.DataFrame, cluster, *, frames: list[pd.DataFrame], caveat: str = "",
                    cpu_optimizer=(0.0, 0.0), errors=None, batch=None, batch_note: str = "",
                    other_end=None) -> None:  # fmt: skip
    """The answer over both halves (one cluster's said first): a table, what the choice leaves out and `caveat` under
    it (answer.py; `cpu_optimizer`: the optimizer's ms and the one-rank step's, scaled; `batch`: a GPU's samples a
    step, and `batch_note` what it rests on, the run's words: said once; `other_end`: a bounded step's two ends' names
    and the other end's rows, whose steps the table's spans reach to)."""
    from harness.commands.console.predict.answer import choice_table

    capacity, (optimizer_ms, step_ms), state = getattr(cluster, "gpu_memory_gib", 0.0), cpu_optimizer, labelled(state)
    if choice_table(state, capacity, frames, cluster_name=cluster.name, optimizer_ms=optimizer_ms, step_ms=step_ms,
                    errors=errors, batch=batch, caveat=caveat, batch_note=batch_note, other_end=other_end):  # fmt: skip
        return
    if capacity and not state.empty and state["activation_mb"].isna().all():  # once dropped without a word
        warning(f"no choice of strategy on {cluster.name}: the activations were not counted (why: the note under the "
                "memory table), so what fits is unknown")  # fmt: skip


def errors_on_own_run(words: str) -> None:
    """The model's error on the run's own steps (perfmodel.own_check.errors_words), said after a cluster's answer."""
    if words:  # its command as typed here (the page's names ddpbench as the README does)
        words = words.replace("(run `ddpbench collectives ", f"(run `{invoked.ddpbench_command()} collectives ")
        say_once(f"ddpbench predict: {words}")
