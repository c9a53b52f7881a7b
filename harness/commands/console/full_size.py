"""ZeRO-1's and FSDP2's answers on a cluster where the profile is a smaller model's and the full size's floors were
put under each step (predict_full_size.with_floors): the model to train's figures first (its floor, which ranks it,
and why: its largest shard, its broadcasts, its gathers over its units), the benched model's predictions after, each
said to be whose. Written through the terminal's `say`, as predictions.zero_answer and fsdp_answer are."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.commands.console import predictions, say
from harness.perfmodel import ranked
from harness.results.values import ms_text

if TYPE_CHECKING:
    import pandas as pd


def has_zero_floors(frames: list[pd.DataFrame]) -> bool:
    return bool(frames) and ranked.floors_in(frames[-1], "zero_full_size_largest_share")


def has_fsdp_floors(frames: list[pd.DataFrame]) -> bool:
    return bool(frames) and ranked.floors_in(frames[-1], "fsdp_full_size_step_floor_ms")


def _steps(rows, column: str) -> str:
    return ", ".join(f"w{int(r['world_size'])} {r[column]:.4g}" for r in rows) + " ms"


def _caps(rows) -> str:
    """'at 100 MiB', or per GPU count where the caps differ."""
    caps = [f"{r['bucket_cap_mb']:g}" for r in rows]
    if len(set(caps)) == 1:
        return f"at {caps[0]} MiB"
    return "at " + ", ".join(f"{cap} MiB at w{int(r['world_size'])}" for cap, r in zip(caps, rows, strict=True))


def zero_answer(frames: list[pd.DataFrame], *, optimizer_ms: float, largest: tuple, whose: str, small: str,
                caveat: str = "", priced: str = predictions.CLUSTER_BROADCASTS) -> None:  # fmt: skip
    """ZeRO-1's floor for the model to train at each GPU count, at the cap the choice ranks it at (ranked.py), why
    (its largest shard of the full size's elements, its largest parameter where that alone bounds it, its
    broadcasts), and the benched model's predictions after it (`small`: whose); predictions.zero_answer (`largest`:
    the profile's largest parameter) where the frames hold no such floor."""
    from harness.analysis import agreement
    from harness.perfmodel.zero import own_cost_words

    if not has_zero_floors(frames):
        predictions.zero_answer(frames, optimizer_ms=optimizer_ms, largest=largest, caveat=caveat, priced=priced)
        return

    rows = [ranked.ranked_row(frame, *ranked.ZERO_COLUMNS, "ZeRO-1") for frame in frames]
    answered = [agreement.answer_row(frame) for frame in frames]
    first, last = rows[0], rows[-1]
    share, name, alone_share = (last["zero_full_size_largest_share"], last["zero_full_size_largest_parameter"],
                                last["zero_full_size_largest_parameter_share"])  # fmt: skip
    alone = alone_share == alone_share and math.isclose(share, alone_share, rel_tol=1e-6)  # NaN: none
    named = f", {name}," if isinstance(name, str) and name else ""  # the meta device's count names none
    bound = f"; its largest parameter{named} alone holds {alone_share:.1%}: more ranks cannot shrink it" * alone
    many = len(rows) > 1
    span = f" (w{int(first['world_size'])} → w{int(last['world_size'])})" * many
    sent = f"{ms_text(first['zero_full_size_broadcast_ms'])} → " * many + ms_text(last["zero_full_size_broadcast_ms"])
    worth = [r for r in rows if r["zero_bucket_view_full_size_broadcast_ms"]
             < predictions.BUCKET_VIEW_WORTH * r["zero_full_size_broadcast_ms"]]  # fmt: skip
    packed = ", ".join(f"{ms_text(r['zero_bucket_view_full_size_broadcast_ms'])} ms at w{int(r['world_size'])}"
                       for r in worth)  # fmt: skip
    packed = f"; parameters_as_bucket_view=true, one broadcast a rank, would take {packed}" if worth else ""
    ddp = ", ".join(f"w{int(r['world_size'])} {ranked.ranked_value(r['step_ms'], r['full_size_step_floor_ms']):.4g}"
                    for r in rows)  # fmt: skip
    said = "; ".join(part for part in (priced, caveat) if part)
    say(f"ddpbench predict: and ZeRO-1 (DDP + torch's ZeroRedundancyOptimizer, its defaults): for {whose}, at least "
        f"{_steps(rows, 'zero_full_size_step_floor_ms')} {_caps(rows)}, its floor, which ranks it (DDP's step as "
        f"ranked there, {ddp} ms, with ZeRO's change for its parameters); {small}'s own prediction "
        f"{_steps(answered, 'zero_step_ms')}, on its shards. Why ({whose}'s, at w{int(last['world_size'])}): its "
        f"optimizer steps the largest shard, {share:.1%} of the elements ({ms_text(optimizer_ms)} → "
        f"{ms_text(last['zero_full_size_optimizer_ms'])} ms{bound}), then each rank broadcasts what it updated, "
        f"overlapping nothing: {int(last['zero_full_size_broadcasts'])} broadcasts, one a parameter, take at least "
        f"{sent} ms{span}{packed}{own_cost_words(last)}" + (f" [{said}]" if said else ""))  # fmt: skip


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
    said = "; ".join(part for part in (priced, caveat) if part)
    say(f"ddpbench predict: and FSDP2 (fully_shard on each block and the root, its defaults): for {whose}, at least "
        f"{_steps(rows, 'fsdp_full_size_step_floor_ms')}, its floor; {small}'s own prediction "
        f"{_steps(rows, 'fsdp_step_ms')}. Why ({whose}'s, at w{int(last['world_size'])}): each block is all-gathered "
        f"before its forward and again before its backward, the root once ({int(last['fsdp_full_size_gathers'])} "
        f"gathers a step over {int(last['fsdp_full_size_units'])} units), each reduce-scattered after its backward; "
        f"the gathers take at least {ms_text(last['fsdp_full_size_gather_ms'])} ms and the reduce-scatters "
        f"{ms_text(last['fsdp_full_size_scatter_ms'])} ms, one at a time; its optimizer steps "
        f"1/{int(last['world_size'])} of every parameter ({ms_text(last['fsdp_optimizer_ms'])} ms){own}"
        + (f" [{said}]" if said else ""))  # fmt: skip
