"""What `predict --cluster` says of DDP's step per bucket cap: one table over every GPU count (the full size's floors
beside each cap where the profile is a smaller size's), then the fastest cap at each GPU count; or, where the compute
is a CPU's and no GPU step scales it, each strategy's collectives per GPU count and what gives the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.commands.console import say

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = (("GPUs", "world_size", "d"), ("nodes", "nodes", "d"), ("cap MiB", "bucket_cap_mb", "g"),
           ("buckets", "buckets", "d"), ("step ms", "step_ms", ".3f"), ("exposed ms", "exposed_comm_ms", ".3f"),
           ("scaling eff.", "scaling_efficiency", ".3f"))  # fmt: skip
"""The profile's predicted step per cap: heading, column, format."""
FLOORS = (("full-size buckets", "full_size_buckets", "d"), ("all-reduces", "full_size_comm_ms", ".4g"),
          ("the last", "full_size_last_ms", ".3g"), ("DDP ≥", "full_size_step_floor_ms", ".4g"),
          ("exposed ≥", "full_size_exposed_ms", ".3g"), ("ZeRO-1 ≥", "zero_full_size_step_floor_ms", ".4g"),
          ("FSDP2 ≥", "fsdp_full_size_step_floor_ms", ".4g"))  # fmt: skip
"""The full size's floors beside it, where `predict_full_size.with_floors` added them."""

FLOORS_NOTE = (
    "  ≥: floors, not predictions: the full size's gradients on this profile's compute as scaled, when each is made "
    "not measured (DDP: its all-reduces one after another, the last after backward; ZeRO-1: DDP's as ranked, its "
    "largest shard, its broadcasts; FSDP2: its gathers and reduce-scatters one at a time). For the "
    "steps: bench --size full on one GPU of the cluster, predict from that run.",
)
"""Under the table where it holds floors: what they are, in one line (docs/clusters.md and the what-if page say how
each is counted)."""


def cluster_table(cluster, frames: list[pd.DataFrame], *, before_own: bool = False) -> None:
    """Every GPU count's predicted step per cap in one table (NCCL's algorithms on the profile's bandwidths), with the
    full size's floors beside where `frames` have them (predict_full_size.with_floors); `before_own`: the steps lack
    DDP's own cost (neither measured on the device nor given), their columns marked so."""
    floored = "full_size_step_floor_ms" in frames[0]
    columns = COLUMNS + FLOORS * floored
    beside = "; ≥: the full size's floors, at least" if floored else ""
    beside += "; *: before DDP's own cost, the one-rank step's too" if before_own else ""
    say(f"ddpbench predict: the step per bucket cap on {cluster.name} ({cluster.gpus_per_node} GPUs a node; NCCL's "
        f"algorithms on the profile's bandwidths; ms{beside}):")  # fmt: skip
    marked = ("step_ms", "scaling_efficiency") if before_own else ()
    rows = [tuple(h + "*" * (column in marked) for h, column, _ in columns)]
    for frame in frames:
        for k, r in enumerate(frame.to_dict("records")):
            cells = [format(r[column], spec) if spec != "d" else str(int(r[column])) for _, column, spec in columns]
            rows.append(tuple(cell if k == 0 or n > 1 else "" for n, cell in enumerate(cells)))  # GPUs once a count
    widths = [max(len(row[n]) for row in rows) for n in range(len(columns))]
    for row in rows:
        say("  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    for line in FLOORS_NOTE * floored:
        say(line)


def collectives_answer(cluster, frames: list[pd.DataFrame], *, trained: bool, profile, optimizer: str) -> None:
    """Where the compute is a CPU's (scaling.steps_known): per GPU count, the ms each strategy's collectives take a step
    on the cluster's network, whatever the GPU computes (ranked.communicated, as the what-if page's table): the full
    size's (the model you will train's, `trained`) where `frames` hold its floors, else the profile's gradients; then
    why no step, strategy or cap is named (the page's banner) and what gives them."""
    import pandas as pd

    from harness.perfmodel.memory import mib_text
    from harness.perfmodel.ranked import communicated
    from harness.perfmodel.sharded import OPTIMIZER_NAMES

    full = "full_size_mb" in frames[0]
    comm = communicated(pd.concat(frames, ignore_index=True), full=full)
    model = "the model you will train" if trained else "the full size"
    whose = (f"{model}'s {mib_text(frames[0]['full_size_mb'].iloc[0])} of gradients (counted on the meta device)"
             if full else f"the profile's {mib_text(profile.grad_bytes / 2**20)} of gradients")  # fmt: skip
    caps = sorted(comm["bucket_cap_mb"].unique())
    say(f"ddpbench predict: what {cluster.name}'s network costs a step, whatever the GPU computes: ms of each "
        f"strategy's collectives with {whose}, NCCL's algorithms on the profile's bandwidths; DDP's all-reduces "
        "overlap backward but for the last bucket's (in brackets: exposed on any GPU), ZeRO-1's are DDP's and "
        "its broadcasts, after its optimizer, FSDP2's gathers and reduce-scatters overlap its blocks' compute:"
    )  # fmt: skip
    named = ("ZeRO-1 broadcasts", "FSDP2 gathers", "reduce-scatters")  # ZeRO-1's all-reduces: the DDP columns'
    rows = [("GPUs", "nodes", *(f"DDP at {cap:g} MiB" for cap in caps), *named)]
    for world, group in comm.groupby("world_size", sort=True):
        by_cap = group.set_index("bucket_cap_mb")
        sharded = (group[name].iloc[0] for name in ("ZeRO-1", "FSDP2 gathers", "FSDP2 reduce-scatters"))
        rows.append((str(world), str(int(group["nodes"].iloc[0])),
                     *(f"{by_cap.at[cap, 'DDP']:.4g} ({by_cap.at[cap, 'DDP last']:.3g})" for cap in caps),
                     *("not modelled" if value != value else f"{value:.4g}" for value in sharded)))  # fmt: skip
    widths = [max(len(row[n]) for row in rows) for n in range(len(rows[0]))]
    for row in rows:
        say("  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    share = profile.optimizer_s / (profile.local_step_s or 1.0)
    say(f"ddpbench predict: no step, strategy to book or cap on {cluster.name}: the profile's compute is a CPU's, "
        f"which hides communication a GPU's would not, and whose {OPTIMIZER_NAMES.get(optimizer, optimizer)} takes "
        f"{share:.1%} of the step, a GPU's another share; --local-step-ms MS, the one-GPU step on {cluster.name}'s "
        "GPU, gives them (with --local-step-gpu NAME where that step was measured on another GPU)")  # fmt: skip
