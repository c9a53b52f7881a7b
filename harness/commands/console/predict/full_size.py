"""ZeRO-1's and FSDP2's answers on a cluster where the profile is a smaller model's and the full size's floors were
put under each step (predict_full_size.with_floors): the model to train's figures first (its floor, which ranks it,
and why: its largest shard, its broadcasts, its gathers over its units), the benched model's predictions after, each
said to be whose. Written through the terminal's `say`, as predictions.zero_answer and fsdp_answer are."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.commands.console import once, predictions, say
from harness.perfmodel.pick import ranked
from harness.perfmodel.schedule import scaled_words
from harness.results.values import ms_text

if TYPE_CHECKING:
    import pandas as pd


def has_zero_floors(frames: list[pd.DataFrame]) -> bool:
    return bool(frames) and ranked.floors_in(frames[-1], "zero_full_size_largest_share")


def has_fsdp_floors(frames: list[pd.DataFrame]) -> bool:
    return bool(frames) and ranked.floors_in(frames[-1], "fsdp_full_size_step_floor_ms")


def fsdp_own_note(sharded) -> str:
    """What FSDP2's step leaves out (own_costs.fsdp_for_cluster's note), in the console's words where it is a CPU's own
    cost, said once here: its figure and the scale it took (own_costs.FsdpOwnCost.scale), the long end of the step the
    answer gives as a range (pick.bounds), and none of DDP's own taken from it where its repeats did not tell it from
    noise (DDP's line above says its figure and that status: the figure is then all of FSDP's, not what it costs
    beyond DDP's), and FSDP's own steps where they did not
    tell its cost from noise (the step a range from 0 all the same); the what-if page says the rest."""
    if not sharded.left_out_s:
        return sharded.note
    # DDP's figure and status are said once, on its own line above: here only that none of it was taken
    untold = " (none of DDP's own cost, not told from noise, taken from it)" * bool(sharded.untold)
    scaled = scaled_words(sharded.scale)
    why = {"the run's": "not told from noise at one rank: the run's", "a CPU's": "unmeasured on a GPU, and not told "
           "from noise at one rank: a CPU's"}.get(sharded.noise, "unmeasured on a GPU: a CPU's")  # fmt: skip
    return (
        f"without FSDP's own cost, {why} puts up to {ms_text(sharded.left_out_s * 1e3)} ms more on it{untold}, {scaled}"
    )


def _steps(rows, column: str) -> str:
    return ", ".join(f"w{int(r['world_size'])} {r[column]:.4g}" for r in rows) + " ms"


def _caps(rows) -> str:
    """'at 100 MiB', or per GPU count where the caps differ."""
    caps = [f"{r['bucket_cap_mb']:g}" for r in rows]
    if len(set(caps)) == 1:
        return f"at {caps[0]} MiB"
    return "at " + ", ".join(f"{cap} MiB at w{int(r['world_size'])}" for cap, r in zip(caps, rows, strict=True))


def _own_prediction(small: str, floors, predicted, floor: str, step: str) -> str:
    """ "; the tiny size's own prediction w8 100, …": the benched model's steps beside the floor, where one is above
    it at some GPU count; '' where the floor is above every one: the benched model's step is then no figure a
    booking rests on (--out's rows and the what-if page keep them). A GPU count with no prediction (NaN: nothing
    priced the benched model's step there) is left out: no 'nan' is a figure."""
    known = [(f, p) for f, p in zip(floors, predicted, strict=True) if not math.isnan(p[step])]
    if all(p[step] <= f[floor] for f, p in known):
        return ""
    return f"; {small}'s own prediction {_steps([p for _, p in known], step)}"


def zero_answer(frames: list[pd.DataFrame], *, optimizer_ms: float, largest: tuple, whose: str, small: str,
                caveat: str = "", priced: str = predictions.CLUSTER_BROADCASTS) -> None:  # fmt: skip
    """ZeRO-1's floor for the model to train at each GPU count, at the cap the choice ranks it at (ranked.py), why
    (its largest shard of the full size's elements, its largest parameter where that alone bounds it, its
    broadcasts), and the benched model's predictions after it (`small`: whose); predictions.zero_answer (`largest`:
    the profile's largest parameter) where the frames hold no such floor."""
    from harness.analysis import agreement
    from harness.perfmodel.sharding.zero import own_cost_words

    if not has_zero_floors(frames):
        predictions.zero_answer(frames, optimizer_ms=optimizer_ms, largest=largest, caveat=caveat, priced=priced)
        return

    rows = [ranked.ranked_row(frame, *ranked.ZERO_COLUMNS, "ZeRO-1") for frame in frames]
    answered = [agreement.answer_row(frame) for frame in frames]
    last = rows[-1]
    if last["zero_full_size_broadcast_ms"] >= last["zero_full_size_optimizer_ms"]:  # the reason that dominates
        why = f"each rank broadcasts what it updated, overlapping nothing: {ranked.zero_broadcasts(rows, every=False)}"
    else:
        why = f"its optimizer steps the largest shard, {last['zero_full_size_largest_share']:.1%} of the elements"
        why += f" ({ms_text(optimizer_ms)} → {ms_text(last['zero_full_size_optimizer_ms'])} ms)"
    said = once("; ".join(part for part in (priced, caveat) if part))  # several clusters: the first's alone
    own = _own_prediction(small, rows, answered, "zero_full_size_step_floor_ms", "zero_step_ms")
    say(f"ddpbench predict: and ZeRO-1 (DDP + torch's ZeroRedundancyOptimizer, its defaults): for {whose}, at least "
        f"{_steps(rows, 'zero_full_size_step_floor_ms')} {_caps(rows)}, its floor, which ranks it{own}. Why at "
        f"w{int(last['world_size'])}: {why}{own_cost_words(last)}" + (f" [{said}]" if said else ""))  # fmt: skip


def fsdp_answer(frames: list[pd.DataFrame], *, whose: str, small: str, caveat: str = "",
                priced: str = predictions.CLUSTER_SHARDED) -> None:  # fmt: skip
    """FSDP2's floor for the model to train at each GPU count (the same at every cap) and why (its gathers over its
    units, its reduce-scatters, one at a time, its optimizer on 1/n), the benched model's predictions after it;
    predictions.fsdp_answer where the frames hold no such floor."""
    from harness.analysis import agreement

    if not has_fsdp_floors(frames):
        predictions.fsdp_answer(frames, caveat=caveat, priced=priced)
        return

    rows = [agreement.answer_row(frame) for frame in frames]
    last = rows[-1]
    own = f"; FSDP's own cost at one rank, {ms_text(last['fsdp_own_ms'])} ms, added" if last["fsdp_own_ms"] > 0 else ""
    own = ranked.fsdp_exposed_words(last) + own
    said = once("; ".join(part for part in (priced, caveat) if part))
    mine = _own_prediction(small, rows, rows, "fsdp_full_size_step_floor_ms", "fsdp_step_ms")
    say(f"ddpbench predict: and FSDP2 (fully_shard on each block and the root, its defaults): for {whose}, at least "
        f"{_steps(rows, 'fsdp_full_size_step_floor_ms')}, its floor{mine}. Why at w{int(last['world_size'])}: its "
        f"{int(last['fsdp_full_size_gathers'])} gathers{ranked.run_as(last, 'fsdp_full_size_gather_algorithms')} take "
        f"at least {ms_text(last['fsdp_full_size_gather_ms'])} ms and its reduce-scatters"
        f"{ranked.run_as(last, 'fsdp_full_size_scatter_algorithms')} {ms_text(last['fsdp_full_size_scatter_ms'])} ms, "
        f"one at a time{own}{ranked.fsdp_changes(rows)}"
        + (f" [{said}]" if said else ""))  # fmt: skip


def fsdp_bf16_what_if(setup: dict | None, configs, trained: dict | None) -> None:
    """What FSDP2's --opt param_dtype=bf16 would change, counted from the model you will train on the meta device and
    said once as counted, not measured: bench offers it on CUDA only, so a CPU's run prices FSDP2's gathers and
    unsharded blocks in fp32, and said only that bf16 "would halve their bytes", with no figure for it. Unsaid where
    the run measured FSDP at bf16, or the model's blocks cannot be counted."""
    from harness.commands.console import say_once
    from harness.commands.predict.full_size import full_size_counts

    options = configs["impl_options"].astype(str) if configs is not None and "impl_options" in configs else None
    if setup is None or (options is not None and options.str.contains('"param_dtype": "bf16"').any()):
        return
    full = full_size_counts(setup, configs, options=trained)
    if full and full.get("largest_block_bytes"):
        say_once(f"ddpbench predict: {fsdp_bf16_words(full)}")


def fsdp_bf16_words(full: dict) -> str:
    """predict's what-if line of FSDP2 at param_dtype=bf16: memory_words.fsdp_bf16_figures (the page's too), said as
    counted, not measured, and why: a CPU's run has no bf16 FSDP row."""
    from harness.perfmodel.memory_words import fsdp_bf16_figures

    return (f"what-if FSDP2 --opt param_dtype=bf16 (counted from the model, not measured: bench runs FSDP at bf16 "
            f"on CUDA only, and this run has no such row): {fsdp_bf16_figures(full)}; the gathers' time is priced "
            "at fp32 above")  # fmt: skip
