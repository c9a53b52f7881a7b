"""The what-if page's per-GPU-count table of a setup: the cap each GPU count's answer names, its step, exposed
communication and efficiency, how far the fastest caps lead, ZeRO-1's and FSDP2's steps beside, and the full size's
floors where the profile is a smaller size's; with why the floors at the most GPUs are what they are."""

from __future__ import annotations

import pandas as pd

from harness.analysis import agreement
from harness.perfmodel.pick import ranked
from harness.perfmodel.schedule import SCALED
from harness.results.values import ms_text
from reports.pages.html import esc, table
from reports.pages.whatif import full_size
from reports.pages.whatif import memory as wm


def best_table(best: pd.DataFrame) -> str:
    cells = [[str(int(r.world_size)), str(int(r.nodes)), esc(f"{r.bucket_cap_mb:g} MiB"), f"{r.step_ms:.4g}",
              f"{r.exposed_comm_ms:.3f}", f"{r.scaling_efficiency:.3f}", esc(agreement.caps_text(r.tied)),
              esc(_lead(r)), _zero_cell(r), f"{r.zero_broadcast_ms:.3f}", _fsdp_cell(r)]
             for r in best.itertuples()]  # fmt: skip
    sized = f" ({wm.size_words(best['size'].iloc[0])})" if full_size.has_floors(best) else ""  # beside floors
    heads = ["GPUs", "nodes", "cap named", f"step ms{sized}", f"exposed comm ms{sized}", f"scaling eff.{sized}",
             "fastest predicted",
             "its lead", f"ZeRO-1 step ms{sized}", "its broadcasts ms", f"FSDP2 step ms{sized}"]  # fmt: skip
    if sized:  # the full size's parameters at the cap each is ranked at: the least each step takes
        heads += [
            "DDP's step at the full size, at least (ms), at the cap it is ranked at",
            "ZeRO-1's, at least (ms), at the cap it is ranked at",
            "FSDP2's, at least (ms)",
            "DDP's efficiency at the full size, at most, at the cap it is ranked at",
        ]
        cells = [[*row, f"{r.full_size_step_floor_ms:.4g} at {r.full_size_cap_mb:g} MiB "
                  f"({ms_text(r.full_size_comm_ms)} ms of all-reduces; {esc(r.full_size_cap_why)})",
                  f"{r.zero_full_size_step_floor_ms:.4g} at {r.zero_full_size_cap_mb:g} MiB "
                  f"({ms_text(r.zero_full_size_broadcast_ms)} ms of broadcasts)",
                  _fsdp_cell(r, "fsdp_full_size_step_floor_ms", f" ({ms_text(r.fsdp_full_size_gather_ms)} ms of "
                             f"gathers, {ms_text(r.fsdp_full_size_scatter_ms)} of reduce-scatters)"),
                  f"{r.full_size_efficiency_at_most:.3f}"]
                 for row, r in zip(cells, best.itertuples(), strict=True)]  # fmt: skip
    zero_noise = ", not told from noise at one rank" * bool("zero_own_noise" in best and best["zero_own_noise"].any())
    left_out = [f"{name}'s, {ms_text(float(best[column].max()))} ms{over or best['fsdp_own_over'].iloc[0]}"
                for name, column, over in (("ZeRO", "zero_own_left_out_ms", f" more than DDP's{zero_noise}"),
                                           ("FSDP", "fsdp_own_left_out_ms", ""))  # ZeRO's: beyond DDP's step
                if best[column].max() > 0]  # fmt: skip
    run_noise = "fsdp_own_noise" in best and (best["fsdp_own_noise"] == "the run's").any()  # a GPU run's, say
    whose = "not told from noise at one rank: the run's" if run_noise else "unmeasured on a GPU: a CPU's"
    note = (f"<p class=caption>* without its own cost, {whose} ({'; '.join(left_out)}, "
            f"{SCALED}) is the long end of the step the choice weighs; bench it on one GPU to measure it.</p>"
            if left_out else "")  # fmt: skip
    return table(heads, cells) + note


def own_over(sharded) -> str:
    """What FSDP's left-out own cost (own_costs.FsdpOwnCost's, a CPU's) is, after its figure: ' more than DDP's' where
    DDP's own cost was taken from it, else ', all of its own cost', with why DDP's was taken as 0 in the console's words
    (`untold`) where its steps did not tell it from noise (a page read '102 ms more than DDP's' where nothing of DDP's
    was taken); and where FSDP's own steps did not tell its cost from noise, that too."""
    noise = ", not told from noise at one rank" * (getattr(sharded, "noise", "") == "a CPU's")  # a range from 0
    if sharded.beyond_ddp:
        return f" more than DDP's{noise}"
    return ", all of its own cost" + f" ({sharded.untold})" * bool(sharded.untold) + noise


def floors_why(group: pd.DataFrame) -> str:
    """Why ZeRO-1's and FSDP2's full-size floors at the most GPUs are what they are (the console: what dominates)."""
    frames = [frame for _, frame in group.groupby("world_size", sort=True)]
    if not frames or not ranked.floors_in(frames[-1], "zero_full_size_largest_share"):
        return ""
    zero, fsdp = [ranked.ranked_row(f, *ranked.ZERO_COLUMNS, "ZeRO-1") for f in frames], frames[-1].iloc[0]
    fsdp = (
        ""
        if pd.isna(fsdp.get("fsdp_full_size_gather_ms"))
        else (f" FSDP2's: {ranked.fsdp_floor_why(fsdp, [f.iloc[0] for f in frames])} ({ranked.CLUSTER_SHARDED}).")
    )
    return (f"<p>Why the floors at {int(zero[-1]['world_size'])} GPUs: ZeRO-1's, {esc(ranked.zero_floor_why(zero))} "
            f"({esc(ranked.CLUSTER_BROADCASTS)}).{esc(fsdp)}</p>")  # fmt: skip


def _zero_cell(row) -> str:
    if row.zero_own_left_out_ms > 0:  # a CPU's, left out of a GPU step given (as DDP's is): the note says so
        return f"{row.zero_step_ms:.4g}*"
    return f"{row.zero_step_ms:.4g}" + (
        f" (its own cost at one rank, {ms_text(row.zero_own_ms)} ms, added)" * bool(row.zero_own_ms > 0)
    )


def _fsdp_cell(row, column: str = "fsdp_step_ms", what: str = "") -> str:
    """FSDP2's step (or `column`: its full-size floor, `what` after it) with the own cost it leaves out, said."""
    if pd.isna(value := getattr(row, column)):
        return "not modelled: no block times" if column == "fsdp_step_ms" else "none: a profiled block never ran"
    said = f"{value:.4g}{what}"  # as the console's steps: four figures
    if getattr(row, "fsdp_own_left_out_ms", 0.0) > 0:  # a CPU's, left out of a GPU step given: the note says so
        return f"{said}*"
    unknown = pd.isna(row.fsdp_own_ms) and row.ddp_own_ms > 0  # DDP's step carries its own cost, FSDP2's none
    return said + " (without FSDP's own cost: no FSDP step at one GPU measured it)" * unknown


def _lead(row) -> str:
    """How far the fastest predicted caps are ahead: of the next cap, or of the caps of 25 MiB or more where the
    answer kept those."""
    if row.lead_set_aside is not None and not pd.isna(row.lead_set_aside):
        return f"{row.lead_set_aside:.2%} over the caps of 25 MiB or more: under 4 %, no evidence: they are kept"
    return "every cap tied" if row.margin is None or pd.isna(row.margin) else f"{row.margin:.1%} over the next cap"
