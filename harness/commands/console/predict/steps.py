"""What `predict --cluster` says of DDP's step per bucket cap: one table over every GPU count (the full size's floors
beside each cap where the profile is a smaller size's), then the fastest cap at each GPU count; or, where the compute
is a CPU's and no GPU step scales it, each strategy's collectives per GPU count and what gives the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.analysis import agreement
from harness.bucketing import DDP_DEFAULT_CAP_MB
from harness.commands.console import once, say, say_once

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = (("GPUs", "world_size", "d"), ("nodes", "nodes", "d"), ("cap MiB", "bucket_cap_mb", "g"),
           ("buckets", "buckets", "d"), ("step", "step_ms", ".4g"), ("exposed", "exposed_comm_ms", ".3g"),
           ("eff.", "scaling_efficiency", ".3f"))  # fmt: skip
"""The profile's predicted step per cap: heading, column, format (ms where not said)."""
FLOORS = (("buckets", "full_size_buckets", "d"), ("all-red.", "full_size_comm_ms", ".4g"),
          ("last", "full_size_last_ms", ".3g"), ("DDP", "full_size_step_floor_ms", ".4g"),
          ("exposed", "full_size_exposed_ms", ".3g"), ("ZeRO-1", "zero_full_size_step_floor_ms", ".4g"),
          ("FSDP2", "fsdp_full_size_step_floor_ms", ".4g"))  # fmt: skip
"""The full size's floors beside it, where `predict_full_size.with_floors` added them: its buckets, their all-reduces
one after another and the last one's, and each strategy's floor."""


def say_floors(parameters: str, *, trained: bool, size: str, benched: bool) -> None:
    """What the floors right of the table's bar are, once, above it (predict_full_size.with_floors adds them): the
    full size's (the model you will train's, `trained`) `parameters` on the profile's compute, made not measured
    (DDP's all-reduces one after another; ZeRO-1's and FSDP2's answers below say theirs; docs/clusters.md each): the
    step's words, no cluster's, so said once over several clusters. Left of the bar: the `benched` model (a run's)
    or the `size` profiled here (--workload's)."""
    whose = "the model you will train" if trained else "the full size"
    others = "benched model" if trained and benched else f"{size} size"
    bench = "bench it (--wopt)" if trained else "bench --size full"
    say_once(f"ddpbench predict: {whose} puts floors under each step, right of | below (≥; left of it the "
             f"{others}'s): {parameters} on this compute, DDP's all-reduces one after another, the last after "
             f"backward; made, not measured: for steps, {bench} on one of the cluster's GPUs")  # fmt: skip


def cluster_table(cluster, frames: list[pd.DataFrame], *, before_own: bool = False) -> None:
    """Every GPU count's predicted step per cap in one table (NCCL's algorithms on the profile's bandwidths), with the
    full size's floors beside where `frames` have them (predict_full_size.with_floors); `before_own`: the steps lack
    DDP's own cost (neither measured on the device nor given), their columns marked so. Caps whose rows are alike in
    every other figure share a row ('1, 5, 10'); figures a cap's row shares with the one above are said once."""
    floored = "full_size_step_floor_ms" in frames[0]
    columns = COLUMNS + FLOORS * floored
    beside = "; *: before DDP's own cost, the one-rank step's too" if before_own else ""  # the floors: said above
    legend = once(f"NCCL's algorithms on the profile's bandwidths; ms; blank: as above{beside}") or "as above"
    say(f"ddpbench predict: the step per bucket cap on {cluster.name} ({cluster.gpus_per_node} GPUs a node; {legend}):")
    marked = ("step_ms", "scaling_efficiency") if before_own else ()
    rows = [tuple(h + "*" * (column in marked) for h, column, _ in columns)]
    for frame in frames:
        merged: list[list[str]] = []
        for r in frame.to_dict("records"):
            cells = [format(r[column], spec) if spec != "d" else str(int(r[column])) for _, column, spec in columns]
            if merged and merged[-1][3:] == cells[3:]:
                merged[-1][2] += f", {cells[2]}"
            else:
                merged.append(cells)
        rows += [tuple(_said_once(cells, merged[k - 1] if k else None)) for k, cells in enumerate(merged)]
    widths = [max(len(row[n]) for row in rows) for n in range(len(columns))]
    split = len(COLUMNS)  # the floors' columns apart: '|'
    for row in rows:
        cells = [cell.rjust(width) for cell, width in zip(row, widths, strict=True)]
        say(("  " + "  ".join(cells[:split]) + (" | " + "  ".join(cells[split:]) if floored else "")).rstrip())


def _said_once(cells: list[str], above: list[str] | None) -> list[str]:
    """A row of one GPU count's as printed: its GPU and node counts on the first row alone, and under it each run of
    figures that says the same as the row above's (the tiny size's buckets and step where the caps tie on the left
    of the bar; right of it the strategies' floors, where the cap changes none of them) left blank, said once."""
    if above is None:
        return cells
    said = ["", "", cells[2]]
    for start, end in _BLOCKS:
        block = cells[start:end]
        said += [""] * len(block) if block == above[start:end] else block
    return said[: len(cells)]


_BLOCKS = ((3, len(COLUMNS)), (len(COLUMNS), len(COLUMNS) + 3), (len(COLUMNS) + 3, len(COLUMNS) + len(FLOORS)))
"""The runs of figures blanked as one where they repeat the row above's: the profile's (buckets, step, exposed,
efficiency), the full size's DDP buckets (buckets, all-reduces, the last), and the strategies' floors."""


def best_cap(frame: pd.DataFrame, *, world: int, decimals: int, caveat: str = "", whose: str = "") -> None:
    """The predicted best caps with their margin over the next; where every cap ties, the answer that follows
    from it: the cap does not matter, so DDP's default does. `caveat`: what the figures rest on, said beside
    the answer rather than only above the tables; `whose`: the model the figures are, where not the one to train
    ('the benched model': its step and efficiency were once read as the trained model's, 0.999 beside 0.985)."""
    tied, margin = agreement.best_and_margin(frame["bucket_cap_mb"], frame["step_ms"])
    best = frame.loc[frame["step_ms"].idxmin()]
    figures = f"{best['step_ms']:.{decimals}f} ms, scaling efficiency {best['scaling_efficiency']:.3f}"
    caveat, whose = f" [{caveat}]" if caveat else "", f" for {whose}" if whose else ""
    if margin is None and len(tied) > 1:
        keep = ("DDP's default 25 MiB is as good as any" if DDP_DEFAULT_CAP_MB in tied
                else "any of them will do")  # fmt: skip
        say(f"  predicted fastest cap at w{world}{whose}: any: every cap is within {agreement.TIE_TOLERANCE * 100:g} "
            f"% of the fastest ({figures}); {keep}{caveat}")  # fmt: skip
        return
    ahead = "" if margin is None else f", {margin:.1%} ahead of the next cap"
    answer = agreement.cap_answer(frame["bucket_cap_mb"], frame["step_ms"])
    if answer.lead_set_aside is not None:  # the answer keeps the larger caps: the lead it sets aside, said here
        kept = answer.text.split(" (", 1)[0]
        ahead += f"; {answer.lead_set_aside:.1%} ahead of {kept}, under the 4 % the model can tell: keep {kept}"
    say(f"  predicted fastest cap at w{world}{whose}: {agreement.caps_text(tied)} ({figures}{ahead}){caveat}")


def best_caps(frames: list[pd.DataFrame], *, decimals: int, caveats: list[str], joint=None, whose: str = "") -> None:
    """`best_cap` at each GPU count (a frame each, its `caveats`), but the GPU counts in a row where every cap ties
    said on one line (a figure said once where every GPU count's is the same), their caveats as `joint(node counts)`
    says them together; `whose`, the model the figures are where not the one to train."""
    named = f" for {whose}" if whose else ""
    from harness.analysis import agreement
    from harness.bucketing import DDP_DEFAULT_CAP_MB

    pending: list[tuple[pd.DataFrame, str, list]] = []

    def flush() -> None:
        if len(pending) == 1:
            best_cap(pending[0][0], world=int(pending[0][0]["world_size"].iloc[0]), decimals=decimals,
                     caveat=pending[0][1], whose=whose)  # fmt: skip
        elif pending:
            bests = [frame.loc[frame["step_ms"].idxmin()] for frame, _, _ in pending]
            worlds = ", ".join(f"w{int(b['world_size'])}" for b in bests)
            steps = _once(f"{b['step_ms']:.{decimals if b['step_ms'] < 1000 else 0}f}" for b in bests)
            effs = _once(f"{b['scaling_efficiency']:.3f}" for b in bests)
            keep = ("DDP's default 25 MiB is as good as any" if all(DDP_DEFAULT_CAP_MB in t for _, _, t in pending)
                    else "any of them will do")  # fmt: skip
            nodes = sorted({int(frame["nodes"].iloc[0]) for frame, _, _ in pending if "nodes" in frame})
            said = joint(nodes) if joint and nodes else "; ".join(c for _, c, _ in pending if c)
            say(
                f"  predicted fastest cap at {worlds}{named}: any: every cap is within "
                f"{agreement.TIE_TOLERANCE * 100:g} % of the fastest ({steps} ms; scaling efficiency {effs}); {keep}"
                + (f" [{said}]" if said else "")
            )
        pending.clear()

    for frame, caveat in zip(frames, caveats, strict=True):
        tied, margin = agreement.best_and_margin(frame["bucket_cap_mb"], frame["step_ms"])
        if margin is None and len(tied) > 1:
            pending.append((frame, caveat, list(tied)))
            continue
        flush()
        best_cap(frame, world=int(frame["world_size"].iloc[0]), decimals=decimals, caveat=caveat, whose=whose)
    flush()


def _once(figures) -> str:
    """'0.290, 0.310', or one figure where every GPU count's is the same."""
    said = list(figures)
    return said[0] if len(set(said)) == 1 else ", ".join(said)


def collectives_answer(
    cluster,
    frames: list[pd.DataFrame],
    *,
    trained: bool,
    profile,
    optimizer: str,
    alone: bool = True,
    hooks=None,
    unpriced: list[str] = (),
    priced: bool = False,
    timed: bool = False,
) -> float:
    """Where the compute is a CPU's (scaling.steps_known): per GPU count, the ms each strategy's collectives take a step
    on the cluster's network, whatever the GPU computes (communication.communicated, the what-if page's table): the full
    size's (the model you will train's, `trained`) where `frames` hold its floors, else the profile's gradients; then
    why no step, strategy or cap is named (the page's banner) and what gives them, unless several clusters are
    (`alone` False: said once for them all, first, `no_step`); DDP's under the 2-byte hooks the run benched (`hooks`:
    compressed.benched_hooks) at the caps it benched them at; the run's strategies none of them prices (`unpriced`:
    communication.unpriced) named under it, with why; `priced`, `timed`: one cluster's --gpu-hour-price and
    --train-samples, unused without a step (no_step says so). The optimizer's share of the step returned."""
    import pandas as pd

    from harness.perfmodel.memory import mib_text
    from harness.perfmodel.pick.communication import LAST_BUCKET_LEAST, communicated, unpriced_words

    full = "full_size_mb" in frames[0]
    comm = communicated(pd.concat(frames, ignore_index=True), full=full)
    model = "the model you will train" if trained else "the full size"
    whose = (f"{model}'s {mib_text(frames[0]['full_size_mb'].iloc[0])} of gradients (counted on the meta device)"
             if full else f"the profile's {mib_text(profile.grad_bytes / 2**20)} of gradients")  # fmt: skip
    caps = sorted(comm["bucket_cap_mb"].unique())
    hooked = {cap: label for cap, label in (hooks or {}).items() if cap in {round(c, 6) for c in caps}}
    legend = once(
        f"ms of each strategy's collectives with {whose}, NCCL's algorithms on the profile's bandwidths; "
        f"DDP's all-reduces overlap backward but for the last bucket's (in brackets: {LAST_BUCKET_LEAST}), "
        "ZeRO-1's are DDP's and its broadcasts, after its optimizer, FSDP2's gathers and reduce-scatters "
        "overlap its blocks' compute" + "; a comm_hook's: DDP's in 2-byte floats, its casts left out" * bool(hooked)
    )  # several clusters: the first's, the others' 'as above'
    say(
        f"ddpbench predict: what {cluster.name}'s network costs a step, whatever the GPU computes: "
        f"{legend or 'ms, as above'}:"
    )
    named = ("ZeRO-1 broadcasts", "FSDP2 gathers", "reduce-scatters")  # ZeRO-1's all-reduces: the DDP columns'
    hook_heads = (f"{label} at {cap:g} MiB" for cap, label in hooked.items())  # named as the run names them
    rows = [("GPUs", "nodes", *(f"DDP at {cap:g} MiB" for cap in caps), *hook_heads, *named)]
    for world, group in comm.groupby("world_size", sort=True):
        by_cap = group.set_index("bucket_cap_mb")
        sharded = (group[name].iloc[0] for name in ("ZeRO-1", "FSDP2 gathers", "FSDP2 reduce-scatters"))
        rows.append((str(world), str(int(group["nodes"].iloc[0])),
                     *(f"{by_cap.at[cap, 'DDP']:.4g} ({by_cap.at[cap, 'DDP last']:.3g})" for cap in caps),
                     *(f"{by_cap.at[cap, 'hook']:.4g} ({by_cap.at[cap, 'hook last']:.3g})" for cap in hooked),
                     *("not modelled" if value != value else f"{value:.4g}" for value in sharded)))  # fmt: skip
    widths = [max(len(row[n]) for row in rows) for n in range(len(rows[0]))]
    for row in rows:
        say("  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    if left_out := unpriced_words(list(unpriced)):
        say(f"  {left_out}")
    share = profile.optimizer_s / (profile.local_step_s or 1.0)
    if alone:  # several clusters: said once, first, for all (no_step)
        no_step([cluster.name], optimizer=optimizer, share=share, priced=priced, timed=timed)
    return share


def no_step(clusters: list[str], *, optimizer: str, share: float, priced: bool = False, timed: bool = False) -> None:
    """Why no step, strategy to book or cap is named on `clusters` (a CPU's compute) and what gives them; `priced`,
    `timed`: --gpu-hour-price, --train-samples given, unused without bookings to price or time (said, not dropped
    silently)."""
    from harness.perfmodel.sharded import OPTIMIZER_NAMES

    given = (f"the one-GPU step on {clusters[0]}'s GPU, gives them (with --local-step-gpu NAME where that step was "
             "measured on another GPU)") if len(clusters) == 1 else ("a one-GPU step, gives them (with "
             "--local-step-gpu NAME, the GPU that timed it)")  # fmt: skip
    say(f"ddpbench predict: no step, strategy to book or cap on {' or '.join(clusters)}: the profile's compute is a "
        f"CPU's, which hides communication a GPU's would not, and whose {OPTIMIZER_NAMES.get(optimizer, optimizer)} "
        f"takes {share:.1%} of the step, a GPU's another share; --local-step-ms MS, {given}")  # fmt: skip
    unused = " and ".join(flag for flag, given in (("--gpu-hour-price", priced), ("--train-samples", timed)) if given)
    if unused:
        what = "no bookings are compared" if len(clusters) > 1 else "no run is timed or priced"
        say(f"ddpbench predict: {unused} not used: {what} without a GPU's step (--local-step-ms MS, the one-GPU "
            "step, gives them)")  # fmt: skip
