"""ZeRO-1's and FSDP2's steps beside DDP's on a run's own network (this machine's collectives run, or a bus bandwidth
given), as `predict --cluster` sets them beside DDP's on a cluster's, and in words what each was priced on: a
collective's own fit where the collectives run measured it, else the all-reduce's (how far the three models were
from the run's own steps there: own_check.py); and the floor each of the three steps has with the full size's
parameters, where the profile is a smaller size's (`with_full_size_floors`), and what each rank holds at that full
size (`at_full_size`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from harness.analysis import agreement
from harness.bucketing import MIB
from harness.perfmodel.clusters.bound import bound_words
from harness.perfmodel.compression import Compressed, wire_share, with_compressed
from harness.perfmodel.memory import HELD, listed
from harness.perfmodel.network import (
    NO_CONTENTION,
    Network,
    broadcast_link,
    fitted_source,
    network_link,
    sharded_links,
)
from harness.perfmodel.pick import ranked
from harness.perfmodel.pick.choice import FLOOR_COLUMNS, SHARD_OF, STEP_COLUMNS
from harness.perfmodel.schedule import Parameters, Profile, bucket_layout, floor_with, predict_caps
from harness.perfmodel.sharding import fsdp, own_costs, zero
from harness.results.values import options_of


def with_sharded_steps(frame: pd.DataFrame, profile: Profile, network: Network, *, world_size: int,
                       fsdp_profile: Profile, fsdp_own_s: float, blocking: bool,
                       zero_own_s: float = 0.0) -> pd.DataFrame:  # fmt: skip
    """DDP's steps per cap on `network` (`schedule.predict_caps`) with DDP's under a compression hook, ZeRO-1's
    columns (its broadcasts on the broadcast's fit, its own cost `zero_own_s` added) and FSDP2's (from
    `fsdp_profile`, the compute without DDP's own cost, `fsdp.compute_only`, with its own cost; each call `blocking`
    on the CPU), as the run's validations price them."""
    frame = with_compressed(frame, profile, link=network_link(network, world_size), world_size=world_size,
                            contention=network.contention.get(world_size) or NO_CONTENTION)  # fmt: skip
    sender = broadcast_link(network, world_size) or network_link(network, world_size)
    frame = zero.with_zero(frame, profile, link=sender, world_size=world_size, own_s=zero_own_s)
    gather, scatter = sharded_links(network, world_size)
    return fsdp.with_fsdp(frame, fsdp_profile, gather=gather, scatter=scatter, world_size=world_size,
                          own_s=fsdp_own_s, blocking=blocking)  # fmt: skip


def cluster_frame(profile: Profile, *, caps: list[float], link, world_size: int, zero_own: own_costs.ZeroOwnCost,
                  fsdp_part: own_costs.FsdpOwnCost) -> pd.DataFrame:  # fmt: skip
    """DDP's steps per cap on a cluster's `link` (`schedule.predict_caps`) with DDP's under a compression hook
    (`compression.with_compressed`), ZeRO-1's (its own cost as `zero_own` takes it) and FSDP2's (`fsdp_part`:
    `own_costs.fsdp_for_cluster`'s profile and own cost): as `predict --cluster` and the what-if page price them
    alike."""
    frame = with_compressed(predict_caps(profile, caps_mb=caps, link=link, world_size=world_size), profile,
                            link=link, world_size=world_size)  # fmt: skip
    sent = [[sum(g.nbytes for g in bucket) for bucket in bucket_layout(profile, cap)] for cap in caps]
    messages = zero.zero_change(profile, sender=link, world_size=world_size).messages  # how NCCL runs each
    step = fsdp.predict_fsdp(fsdp_part.profile, gather=link, scatter=link, world_size=world_size)
    run_as = _algorithms(link, sent, world_size, "comm") | _algorithms(
        link, [messages], world_size, "zero_broadcast", "broadcast", len(caps)
    )
    for op, prefix in (("all_gather", "fsdp_gather"), ("reduce_scatter", "fsdp_scatter")):
        run_as |= _algorithms(link, [[b for o, b in step.sent if o == op] if step else []], world_size, prefix, op,
                              len(caps))  # fmt: skip
    frame = zero.with_zero(frame.assign(**run_as), profile, link=link, world_size=world_size,
                           own_s=zero_own.added_s, left_out_s=zero_own.left_out_s)  # fmt: skip
    return fsdp.with_fsdp(frame, fsdp_part.profile, gather=link, scatter=link, world_size=world_size,
                          own_s=fsdp_part.own_s, left_out_s=fsdp_part.left_out_s)  # fmt: skip


def _algorithms(link, sent: list, world_size: int, prefix: str, op: str = "all_reduce", rows: int = 1) -> dict:
    """`{prefix}_algorithms` (each cap's buckets, or `op`s, as NCCL runs them, in words; one list of sizes for every
    of `rows` caps) and `{prefix}_algorithm` (the pair that carries most of their time) where `link` is a cluster's
    (nccl.ClusterLink.algorithms); {} on another network."""
    if not hasattr(link, "algorithms"):
        return {}
    said = [link.algorithms(sizes, world_size, op) for sizes in sent] * rows
    return {f"{prefix}_algorithms": [words for words, _ in said], f"{prefix}_algorithm": [pair for _, pair in said]}


ALIKE_BYTES = 0.05
"""The most the full size's gradient bytes may differ from a profile's of as many tensors for the profile to stand for
it: an all-reduce's time grows no faster than its bytes, so its communication differs by this share at most, the
smallest change ddpbench counts (analysis.stats.DEFAULT_THRESHOLD). vit_b_16's tiny and full sizes differ by their
head and position embedding alone, 1 % of 330 MiB, and were warned of as another model."""


def alike_tensors(profile: Profile, params: Parameters | None) -> int:
    """How many gradient tensors the profile and the full size's `params` both have, where they have as many and their
    bytes differ (else no other size) by less than ALIKE_BYTES: the profile stands for the full size, its caps hold for
    it and no floor of the full size's is set under its steps, on the console as on the what-if page; 0 where not."""
    grads = getattr(profile, "grads", None)
    if params is None or not grads or not params.grad_bytes or params.grad_bytes == profile.grad_bytes:
        return 0
    close = abs(params.grad_bytes - profile.grad_bytes) < ALIKE_BYTES * params.grad_bytes
    return len(grads) if close and len(params.trained) == len(grads) else 0


def floored_parameters(profile: Profile, params: Parameters | None) -> Parameters | None:
    """The full size's `params` to set floors under the profile's steps with (with_full_size_floors); None where there
    are none or the profile stands for them (alike_tensors)."""
    return None if params is None or alike_tensors(profile, params) else params


def with_full_size_floors(frame: pd.DataFrame, profile: Profile, params: Parameters, *, link, world_size: int,
                          fsdp_profile: Profile, fsdp_own_s: float = 0.0, zero_own_s: float = 0.0):  # fmt: skip
    """A cluster frame (DDP's steps per cap with ZeRO-1's and FSDP2's) with each step's floor for the full size's
    `params` on the same compute (the profile's; FSDP2's `fsdp_profile`, without DDP's own cost), on `link`: DDP's
    (`full_size_*`: schedule.floor_with; `compressed_full_size_step_floor_ms` under a compression hook), ZeRO-1's
    (DDP's step as the choice ranks it, the higher of its prediction and its floor, with ZeRO's change for these
    parameters: its optimizer on the largest shard, their broadcasts after it, its own cost: `zero_full_size_*`; it
    stands in for ZeRO-1's predicted step, whose shards and broadcasts are the smaller model's: choice.REPLACED) and
    FSDP2's (`fsdp_full_size_*`, `fsdp_kept_full_size_step_floor_ms`: fsdp.floor_with)."""
    floors = [floor_with(profile, params, cap_mb=cap, link=link, world_size=world_size)
              for cap in frame["bucket_cap_mb"]]  # fmt: skip
    hooked = Compressed(link, wire_share(params.trained, "fp16"))  # fp16's and bf16's hooks alike
    compressed = [floor_with(profile, params, cap_mb=cap, link=hooked, world_size=world_size)
                  for cap in frame["bucket_cap_mb"]]  # fmt: skip
    full = dataclasses.replace(profile, grads=params.trained, frozen=params.frozen)
    change = zero.zero_change(full, sender=link, world_size=world_size, own_s=zero_own_s)
    packed = zero.zero_change(full, sender=link, world_size=world_size, bucket_view=True)
    largest, (units, gathers) = zero.largest_parameter(full), _fsdp_units(params)
    sharded = {"gather": link, "scatter": link, "world_size": world_size, "own_s": fsdp_own_s}
    fsdp_floor, kept = (
        (fsdp.floor_with(fsdp_profile, params, **sharded, reshard_after_forward=reshard) for reshard in (True, False))
        if every_block_ran(fsdp_profile)
        else [fsdp.FsdpFloor(*[float("nan")] * 4)] * 2  # a block whose forward never ran: the floor would count it
    )
    n, run_as = len(frame), _algorithms(link, [f.bucket_bytes for f in floors], world_size, "full_size")
    run_as |= _algorithms(link, [change.messages], world_size, "zero_full_size_broadcast", "broadcast", n)
    run_as |= _algorithms(link, [fsdp_floor.gather_bytes], world_size, "fsdp_full_size_gather", "all_gather", n)
    run_as |= _algorithms(link, [fsdp_floor.scatter_bytes], world_size, "fsdp_full_size_scatter", "reduce_scatter", n)
    run_as["full_size_bound"] = [bound_words(link, f.bucket_bytes, world_size) for f in floors]  # '' off a cluster
    return frame.assign(**run_as,
                        full_size_buckets=[f.buckets for f in floors],
                        full_size_comm_ms=[f.comm_s * 1e3 for f in floors],
                        full_size_last_ms=[f.last_s * 1e3 for f in floors],
                        full_size_last_largest=[f.last_largest[0] for f in floors],
                        full_size_last_largest_mb=[f.last_largest[1] / MIB for f in floors],
                        full_size_step_floor_ms=[f.step_s * 1e3 for f in floors],
                        full_size_exposed_ms=[f.exposed_s * 1e3 for f in floors],
                        compressed_full_size_step_floor_ms=[f.step_s * 1e3 for f in compressed],
                        compressed_full_size_exposed_ms=[f.exposed_s * 1e3 for f in compressed],
                        compressed_full_size_comm_ms=[f.comm_s * 1e3 for f in compressed],
                        compressed_full_size_last_ms=[f.last_s * 1e3 for f in compressed],
                        zero_full_size_step_floor_ms=[change.step_s(max(f.step_s, ddp_ms / 1e3)) * 1e3
                                                      for f, ddp_ms in zip(floors, frame["step_ms"], strict=True)],
                        zero_full_size_optimizer_ms=change.optimizer_s * 1e3,
                        zero_full_size_broadcast_ms=change.broadcast_s * 1e3,
                        zero_bucket_view_full_size_broadcast_ms=packed.broadcast_s * 1e3,
                        zero_full_size_broadcasts=change.broadcasts,
                        zero_full_size_largest_share=change.largest_share,
                        zero_full_size_largest_parameter=largest[0], zero_full_size_largest_parameter_share=largest[1],
                        fsdp_full_size_units=len(units), fsdp_full_size_gathers=gathers,
                        fsdp_full_size_step_floor_ms=fsdp_floor.step_s * 1e3,
                        fsdp_kept_full_size_step_floor_ms=kept.step_s * 1e3,
                        fsdp_full_size_gather_ms=fsdp_floor.gather_s * 1e3,
                        fsdp_full_size_scatter_ms=fsdp_floor.scatter_s * 1e3,
                        fsdp_full_size_exposed_ms=fsdp_floor.exposed_s * 1e3,
                        fsdp_full_size_collectives=fsdp_floor.collectives)  # fmt: skip


def _fsdp_units(params: Parameters) -> tuple[set, int]:
    """The full size's FSDP2 units holding a parameter (the root, None, and each block) and its gathers a step with
    reshard_after_forward, as fsdp.floor_with counts them: each unit for forward, each block holding a trained
    parameter again for backward."""
    units = {p.block for p in (*params.trained, *params.frozen)}
    trained = {p.block for p in params.trained} - {None}
    return units, len(units) + len(trained & units)


def every_block_ran(profile: Profile) -> bool:
    """Whether forward used every block of the profile that holds a parameter (unknown, in a profile stored before
    forward was timed block by block: taken as yes). FSDP2 gathers nothing for a block forward never runs, and the
    meta device cannot tell which of the full size's blocks those are, so their floor would count them."""
    every = (*profile.grads, *profile.frozen)
    if all(g.used_s is None for g in every):
        return True
    ran = {g.block for g in every if g.used_s is not None}
    return all(g.block is None or g.block in ran for g in every)


def priced_on(network: Network, world_size: int) -> tuple[str, str]:
    """What ZeRO-1's broadcasts and FSDP2's collectives are priced on at this world size, in words."""
    sender, (gather, scatter) = broadcast_link(network, world_size), sharded_links(network, world_size)
    fallback = network_link(network, world_size).source
    return (broadcasts_priced(sender and sender.source, fallback),
            collectives_priced(fitted_source(gather, "all_gather"), fitted_source(scatter, "reduce_scatter"),
                               fallback))  # fmt: skip


def broadcasts_priced(broadcast_source: str | None, network_source: str) -> str:
    return (f"broadcasts as fitted in {broadcast_source}" if broadcast_source else
            f"no broadcast measured: at the all-reduce's α and bus bandwidth ({network_source})")  # fmt: skip


def collectives_priced(gather_source: str | None, scatter_source: str | None, network_source: str) -> str:
    """FSDP2's: each one's own fit (`network.fitted_source`: None where none was measured), else the all-reduce's."""
    if gather_source is None and scatter_source is None:
        return f"no all-gather or reduce-scatter measured: at the all-reduce's α and bus bandwidth ({network_source})"
    if gather_source == scatter_source:
        return f"gathers and reduce-scatters as fitted in {gather_source}"
    said = [f"{name} as fitted in {source}" for name, source in (("gathers", gather_source),
            ("reduce-scatters", scatter_source)) if source]  # fmt: skip
    if missing := "gathers" if gather_source is None else "reduce-scatters" if scatter_source is None else "":
        said.append(f"no {missing[:-1]} measured: {missing} at the all-reduce's α and bus bandwidth ({network_source})")
    return "; ".join(said)


MODEL_COUNTS = ("param_bytes", "grad_bytes", "largest_param_bytes", "root_param_bytes", "root_grad_bytes",
                "largest_block_bytes", "largest_block_grad_bytes", "activation_mb", "activation_top",
                "tokens_per_batch")  # fmt: skip


def at_full_size(rows: pd.DataFrame, full: dict) -> pd.DataFrame:
    """The run's rows re-counted at the full size (`full`: harness.measure.modelinfo.counts_on_meta's): a parameter,
    its gradient and its optimizer state take the same bytes at any size, so what each rank held (`held_*`) and the
    buckets' total grow as the full size's parameter and gradient bytes over the run's; the model's sizes and its
    activations (counted at the run's batch) are the full size's. PowerSGD's largest bucket is laid out anew (DDP's
    rules over the full size's gradients, at the row's cap), and the full size's parameters ride along
    (`parameter_table`: ZeRO-1's rank holds the state of its share by torch's partition of them, which a small
    model's largest parameter does not scale to). Rows without the run's sizes are left out."""
    known = rows[rows["grad_bytes"].fillna(0) > 0] if "grad_bytes" in rows else rows.iloc[:0]
    params, grads = full["param_bytes"] / known["param_bytes"], full["grad_bytes"] / known["grad_bytes"]
    scaled = known.assign(**{c: known[c] * (params if c == "held_param_mb" else grads)
                             for c in (*HELD, "held_grad_view_mb") if c in known})  # fmt: skip
    if "bucket_sizes_mb" in known:
        scaled["bucket_sizes_mb"] = [_laid_out_at(sizes, ratio, options, full) if listed(sizes) else sizes
                                     for sizes, ratio, options in zip(known["bucket_sizes_mb"], grads,
                                                                      known["impl_options"], strict=True)]  # fmt: skip
    table = [full.get("parameters")] * len(scaled) if full.get("parameters") else None  # ZeRO's partition of them
    return scaled.assign(**{c: full.get(c) for c in MODEL_COUNTS}, size="full", parameter_table=table)


def _laid_out_at(sizes, ratio: float, options_json: str | None, full: dict) -> list[float]:
    """A row's buckets at the full size: each grown by `ratio` (their total is what counts), or, under PowerSGD,
    whose copies are of the largest bucket, laid out as DDP would at the row's cap."""
    options = options_of(options_json)
    if options.get("comm_hook") != "powersgd":
        return [float(size) * ratio for size in sizes]
    from harness.bucketing import DDP_DEFAULT_CAP_MB, MIB, assign_buckets, first_bucket_bytes

    cap = int(float(options.get("bucket_cap_mb") or DDP_DEFAULT_CAP_MB) * MIB)
    first = first_bucket_bytes(cap, cap_given=options.get("bucket_cap_mb") is not None)
    ready = range(len(full["grad_sizes"]) - 1, -1, -1)  # backward makes the last registered gradients first
    buckets = assign_buckets(full["grad_sizes"], full["grad_dtypes"], cap_bytes=cap, first_cap_bytes=first, order=ready)
    return [sum(full["grad_sizes"][i] for i in bucket) / MIB for bucket in buckets]


GPU_OPTIMIZER_STEP = {"adam": "a GPU's Adam, one memory-bound pass over the parameters, gradients and two moments",
                      "adamw": "a GPU's AdamW, one memory-bound pass over the parameters, gradients and two moments",
                      "sgd": "a GPU's SGD, one memory-bound pass over the parameters and gradients"}  # fmt: skip


OPTIMIZER_NAMES = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}
"""Each optimizer a run steps (`--optimizer`), as its class is named."""


def optimizer_share_caveat(share: float, *, scaled: bool, optimizer: str, terse: bool = False) -> str:
    """Where the profile's compute is a CPU's: its optimizer's share of the step is no GPU's, and ZeRO-1's and
    FSDP2's gains lean on it (said by the console's and the page's choice alike; `terse`: the console's words, the
    page says what a GPU's optimizer step is)."""
    if terse:
        named = OPTIMIZER_NAMES.get(optimizer, optimizer)
        return (
            f"the optimizer's {share:.1%} of the step is the CPU's{', scaled' * scaled}: a GPU's {named} takes "
            "its own share, on which ZeRO-1's and FSDP2's gains over DDP rest (--local-optimizer-ms gives it)"
        )
    step = GPU_OPTIMIZER_STEP.get(optimizer, f"a GPU's {optimizer}, a memory-bound pass over its state")
    # No direction is claimed: a CPU's bf16 autocast makes the optimizer a tiny share that a GPU's Adam over a large
    # model is not, and a CPU's fp32 compute makes it a larger share than a GPU's fast matmuls leave it.
    return (f"the optimizer's {share:.1%} of the step is the CPU's{', scaled' * scaled}: {step}, takes a share of its "
            "own, larger or smaller, which ZeRO-1's and FSDP2's gains over DDP rest on (--local-optimizer-ms gives "
            "it)")  # fmt: skip


# The sharded steps a cluster frame holds (their label, step and optimizer part), and the own cost each leaves out
# where a CPU measured it and the step is a GPU's (`left_out_ms`)
SHARDED_STEPS = (("ZeRO-1", "zero_step_ms", "zero_optimizer_ms"), ("FSDP2", "fsdp_step_ms", "fsdp_optimizer_ms"))
LEFT_OUT = {"ZeRO-1": "zero_own_left_out_ms", "FSDP2": "fsdp_own_left_out_ms"}


def optimizer_break_even(frame: pd.DataFrame, *, optimizer_ms: float, step_ms: float,
                         labels: tuple[str, ...] = ("ZeRO-1", "FSDP2")) -> str:  # fmt: skip
    """How much of ZeRO-1's and FSDP2's (of `labels`) predicted lead over DDP rests on the optimizer's time (a CPU's
    share, which no GPU's is): each steps only its shard, so were the optimizer's time f of what the profile gives,
    DDP's step would lose (1 − f) × `optimizer_ms` and theirs (1 − f) × their shard's; their lead holds while the
    optimizer takes at least f × `optimizer_ms` / `step_ms` of the step. At the cap the choice ranks each at
    (ranked.py), for the frame's GPU count, each step with the own cost it leaves out added (a CPU's, scaled: no
    lead that this eats is one):
    'at w64, ZeRO-1's lead needs the optimizer at 12% of the step or more; FSDP2's holds with no optimizer time'."""
    if not optimizer_ms or not step_ms or frame.empty:
        return ""
    named, floor_of = agreement.answer_row(frame), {v: FLOOR_COLUMNS[k] for k, v in STEP_COLUMNS.items()}
    said = []
    for label, step, shard in (s for s in SHARDED_STEPS if s[0] in labels):
        if step not in named or pd.isna(named[step]) or pd.isna(named.get(shard)):
            continue
        row = ranked.ranked_row(frame, step, floor_of[step], label)  # at the cap the choice ranks it at
        step_ms_, shard_ms = _raised(row, step, shard)  # as the choice ranks them: a higher full-size floor
        step_ms_ += np.nan_to_num(float(row.get(LEFT_OUT[label], 0.0)))  # its whole step, as the choice weighs it
        lead, saved = _raised(ranked.ddp_ranked_row(frame), "step_ms")[0] - step_ms_, optimizer_ms - shard_ms
        if lead <= 0 or saved <= 0:
            continue  # no lead, or none the optimizer could take away
        needed = max(0.0, 1 - lead / saved) * optimizer_ms / step_ms
        share = f"{needed:.0%}" if needed >= 0.01 else f"{needed:.1%}"
        said.append(f"{label}'s lead needs the optimizer at {share} of the step or more" if needed
                    else f"{label}'s holds with no optimizer time at all")  # fmt: skip
    return f"at w{int(named['world_size'])}, {'; '.join(said)}" if said else ""


def _raised(named: pd.Series, step: str, shard: str | None = None) -> tuple[float, float | None]:
    """A frame row's step and its optimizer's part, or its full-size floor's (where higher; ZeRO-1's: as `choose`)."""
    floor_column = {v: FLOOR_COLUMNS[k] for k, v in STEP_COLUMNS.items()}[step]
    floor = named.get(floor_column, np.nan)
    if not pd.isna(floor) and (floor > named[step] or step == STEP_COLUMNS["optimizer_shard"]):
        return float(floor), (float(named[SHARD_OF[floor_column]]) if shard else None)
    return float(named[step]), (float(named[shard]) if shard else None)
