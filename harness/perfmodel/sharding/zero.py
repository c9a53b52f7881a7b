"""ZeRO-1's step (`zero`: DDP + torch's ZeroRedundancyOptimizer) at world sizes you cannot run.

It is DDP's step (`harness.perfmodel.schedule`: the same buckets, the same overlap with backward) changed
twice, as torch's ZeroRedundancyOptimizer changes it:

- the optimizer steps only the parameters its rank owns. torch assigns them largest first, each to the rank
  with the fewest elements so far; every rank then waits for the one that owns the most, so the optimizer's
  time is scaled by that rank's share of the elements (an element-wise optimizer's time is taken as
  proportional to its elements);
- then every rank broadcasts what it updated, after the optimizer, overlapping nothing: one broadcast a
  parameter (torch's default), or one a rank with `parameters_as_bucket_view`.

Frozen parameters (no gradient) are partitioned and broadcast too, as torch's optimizer holds them, but
not stepped. And ZeRO's own cost, measured where nothing is communicated (its step at one rank minus DDP's:
torch broadcasts every parameter even to a group of one, and keeps its partition's bookkeeping), is added
at every world size, as DDP's own cost is to DDP's step, where the repeats tell the two steps apart (the
broadcasts' per-call part of it is then also in each broadcast's α beyond one rank: counted twice, a little). With
overlap_with_ddp (the optimizer inside DDP's hook) the step is another schedule: not modelled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.perfmodel.network import NO_CONTENTION, Contention
from harness.perfmodel.schedule import Grad, Profile, StepPrediction, predict_cap
from harness.results.values import ms_text

ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}  # a dtype not named here: 4


def elements(grad: Grad) -> int:
    return grad.nbytes // ITEMSIZE.get(grad.dtype.removeprefix("torch."), 4)


def partition(grads: Sequence[Grad], world_size: int) -> list[list[Grad]]:
    """The parameters each rank owns, as torch's ZeroRedundancyOptimizer assigns them (one parameter group):
    in registration order, sorted largest first (a stable sort), each to the rank with the fewest elements
    so far (the lowest rank on a tie)."""
    owned: list[list[Grad]] = [[] for _ in range(world_size)]
    sizes = [0] * world_size
    for grad in sorted(sorted(grads, key=lambda g: g.index), key=elements, reverse=True):
        rank = sizes.index(min(sizes))
        owned[rank].append(grad)
        sizes[rank] += elements(grad)
    return owned


def largest_share(trained: Sequence[Grad], frozen: Sequence[Grad], world_size: int) -> float:
    """The share of the trained elements the rank that owns the most of them holds under torch's partition (every
    parameter partitioned, the frozen too): the share of the optimizer's work and of its state (Adam's moments are
    the trained parameters') that rank takes."""
    total, ids = sum(elements(g) for g in trained), {g.index for g in trained}
    owned = partition((*trained, *frozen), world_size)
    return max(sum(elements(g) for g in shard if g.index in ids) for shard in owned) / total if total else 1.0


def counted_table(group) -> list | None:
    """The parameter table of the model a ZeRO-1 group of rows was re-counted at (sharded.at_full_size's
    `parameter_table`); None for another strategy, or rows as the run measured them (its ranks held what torch's
    partition gave them)."""
    from harness.analysis import roles

    if "parameter_table" not in group or not roles.sharded_optimizer_over_allreduce(group).any():
        return None
    table = group["parameter_table"].iloc[0]
    return (
        table if isinstance(table, list | tuple) and table else None
    )  # a setup not re-counted: NaN beside one that is


def optimizer_state_mb(table: Sequence[tuple], whole_mb: float, world_size: int) -> float:
    """The optimizer state (MiB) ZeRO-1's rank that owns the most keeps at `world_size`, of a model whose parameters
    are `table` (modelinfo.parameter_table's rows, counted on the meta device) and whose whole state is `whole_mb`
    (one rank's): its share by torch's partition of those parameters, not by another size's (whose largest
    parameter, a tied embedding, may be most of a small model and little of the full one)."""
    from harness.perfmodel.schedule import parameters_of

    params = parameters_of(table)
    return whole_mb * largest_share(params.trained, params.frozen, world_size)


def broadcast_messages(grads: Sequence[Grad], world_size: int, *, bucket_view: bool = False) -> list[int]:
    """The bytes of each broadcast that brings every rank the updated parameters: each parameter alone, or
    with `bucket_view` each rank's parameters in one flat buffer, one a rank."""
    if world_size <= 1:
        return []
    owned = partition(grads, world_size)
    if bucket_view:  # torch sends a one-element bucket for a rank that owns nothing
        return [max(sum(g.nbytes for g in shard), 4) for shard in owned]
    return [g.nbytes for shard in owned for g in shard]


@dataclasses.dataclass(frozen=True)
class ZeroChange:
    """What ZeRO-1 changes in DDP's step at one world size, whatever the cap: the optimizer on the largest shard
    and the broadcasts after it."""

    whole_optimizer_s: float
    optimizer_s: float  # on the rank that owns the most elements
    broadcast_s: float
    broadcasts: int
    largest_share: float  # that rank's share of the elements
    own_s: float = 0.0  # ZeRO's own cost beyond DDP's (`own_cost_s`); 0 where not measured or left out
    messages: tuple[int, ...] = ()  # each broadcast's bytes, in the order they are sent

    def step_s(self, ddp_step_s: float) -> float:
        return ddp_step_s - self.whole_optimizer_s + self.optimizer_s + self.broadcast_s + self.own_s


def zero_change(profile: Profile, *, sender, world_size: int, bucket_view: bool = False,
                own_s: float = 0.0) -> ZeroChange:  # fmt: skip
    """ZeroChange at this world size, the broadcasts sent on `sender` (a link with `broadcast_s`: a fitted
    broadcast, or a cluster's), ZeRO's own cost `own_s` added. Frozen parameters are partitioned and broadcast
    as the others (torch's optimizer holds every parameter it was given), but the optimizer skips them: its
    share counts the trained elements a rank owns."""
    everything = (*profile.grads, *profile.frozen)
    share = largest_share(profile.grads, profile.frozen, world_size)
    messages = broadcast_messages(everything, world_size, bucket_view=bucket_view)
    sent = sum(sender.broadcast_s(nbytes, world_size) for nbytes in messages)
    return ZeroChange(profile.optimizer_s, profile.optimizer_s * share, sent, len(messages), share, own_s,
                      tuple(messages))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ZeroStep:
    ddp: StepPrediction  # DDP's step, its optimizer stepping every parameter
    change: ZeroChange

    @property
    def step_s(self) -> float:
        return self.change.step_s(self.ddp.step_s)


def predict_zero(
    profile: Profile,
    *,
    cap_mb: float,
    link,
    world_size: int,
    broadcast=None,
    contention: Contention = NO_CONTENTION,
    bucket_view: bool = False,
    cap_given: bool = True,
    own_s: float = 0.0,
) -> ZeroStep:
    """ZeRO-1's step at this cap and world size: `link` all-reduces DDP's buckets (`cap_given` false: DDP's
    default layout); `broadcast` (a link with `broadcast_s`) sends the parameters, `link` itself where none
    is given; ZeRO's own cost `own_s` added."""
    ddp = predict_cap(profile, cap_mb=cap_mb, link=link, world_size=world_size, contention=contention,
                      cap_given=cap_given)  # fmt: skip
    change = zero_change(profile, sender=broadcast or link, world_size=world_size, bucket_view=bucket_view,
                         own_s=own_s)  # fmt: skip
    return ZeroStep(ddp, change)


def largest_parameter(profile: Profile) -> tuple[str | None, float]:
    """The parameter with the most elements (its name, '' where the profile has none; None without parameters)
    and its share of them: no rank's shard can be smaller."""
    if not profile.grads:
        return None, 0.0
    largest = max(profile.grads, key=elements)
    return largest.name, elements(largest) / sum(elements(g) for g in profile.grads)


def zero_columns(change: ZeroChange, ddp_step_s: float) -> dict:
    """ZeRO-1's step and its parts as the columns `predict --out` writes beside DDP's step at the same cap."""
    return {"zero_step_ms": change.step_s(ddp_step_s) * 1e3, "zero_optimizer_ms": change.optimizer_s * 1e3,
            "zero_broadcast_ms": change.broadcast_s * 1e3, "zero_broadcasts": change.broadcasts,
            "zero_largest_share": change.largest_share, "zero_own_ms": change.own_s * 1e3}  # fmt: skip


def with_zero(frame, profile: Profile, *, link, world_size: int, own_s: float = 0.0, left_out_s: float = 0.0):
    """`schedule.predict_caps`' frame with ZeRO-1's step at each of its caps (torch's defaults: one broadcast a
    parameter) from DDP's step there, the broadcasts on `link` (a cluster's: `ClusterLink.broadcast_s`), ZeRO's
    own cost `own_s` added (`left_out_s`: a CPU's, left out of a GPU's step), and what the broadcasts would take
    with `parameters_as_bucket_view` (one a rank). The change is the same at every cap: computed once."""
    import pandas as pd

    change = zero_change(profile, sender=link, world_size=world_size, own_s=own_s)
    packed = zero_change(profile, sender=link, world_size=world_size, bucket_view=True)
    columns = pd.DataFrame([zero_columns(change, step_ms / 1e3) for step_ms in frame["step_ms"]], index=frame.index)
    columns["zero_bucket_view_broadcast_ms"] = packed.broadcast_s * 1e3
    columns["zero_bucket_view_broadcasts"] = packed.broadcasts
    columns["zero_own_left_out_ms"] = left_out_s * 1e3
    return pd.concat([frame, columns], axis=1)


# ---------------------------------------------------------------- against a run's zero rows


MODELLED_OPTIONS = {"bucket_cap_mb", "parameters_as_bucket_view"}  # any other option is another step


def run_checks(configs, profiles, network, *, cores: int | None) -> list[dict]:
    """Per ZeRO-1 configuration (`roles.sharded_optimizer_over_allreduce`) of a run at world size ≥ 2 with a
    stored profile and no option but those modelled: measured (the geometric mean of its repeats' medians, as
    the run page pools them) against predicted from the profile calibrated on the run's one-rank rows
    (`predict.run_calibration`, as DDP's sweep is), with the network's contention where measured and its
    fitted broadcast (else the all-reduce's α and bus bandwidth); its compute slowed where the ranks outnumber the
    run's `cores` (predict.core_share), as predict --run prices it."""
    from harness.analysis import roles, stats
    from harness.analysis.verdicts.sweep import given_cap
    from harness.perfmodel import measured, predict
    from harness.perfmodel.network import broadcast_link, network_link
    from harness.perfmodel.schedule import calibrate
    from harness.results.values import options_of

    rows = configs.fillna(measured.SETUP_DEFAULTS)
    options = roles.beyond_defaults_of(rows)  # torch's defaults asked by name are the model's own step
    rows = rows[roles.sharded_optimizer_over_allreduce(rows) & (rows["status"] == "ok") & (rows["world_size"] > 1)
                & options.map(lambda o: set(o) <= MODELLED_OPTIONS) & rows["step_ms_median"].notna()]  # fmt: skip
    checks = []
    for (impl, impl_options, world, *keys), group in rows.groupby(["impl", "impl_options", "world_size",
                                                                    *measured.SETUP_KEYS]):  # fmt: skip
        setup = dict(zip(measured.SETUP_KEYS, keys, strict=True))
        profile = predict.profile_for(profiles, setup)
        if profile is None or not network.links:
            continue
        chosen = options_of(impl_options)
        cap = given_cap(impl_options) or 25.0
        link, sender = network_link(network, int(world)), broadcast_link(network, int(world))
        calibrated = calibrate(profile, predict.run_calibration(configs, setup, profile=profile))
        share = predict.core_share(configs, setup, world=int(world), cores=cores)  # None: a rank to a core
        calibrated = predict.with_shared_cores(calibrated, share)
        own_s = measured.zero_own_cost_s(configs, setup) or 0.0
        step = predict_zero(calibrated, cap_mb=cap, link=link, world_size=int(world), broadcast=sender,
                            contention=network.contention.get(int(world), NO_CONTENTION),
                            bucket_view=bool(chosen.get("parameters_as_bucket_view")),
                            cap_given=given_cap(impl_options) is not None, own_s=own_s)  # fmt: skip
        checks.append({**setup, "impl": impl, "world_size": int(world), "bucket_cap_mb": cap,
                       "impl_options": impl_options,
                       "measured_ms": stats.geometric_mean(group["step_ms_median"]), "predicted_ms": step.step_s * 1e3,
                       "ddp_ms": step.ddp.step_s * 1e3, "whole_optimizer_ms": step.change.whole_optimizer_s * 1e3,
                       **zero_columns(step.change, step.ddp.step_s),
                       "broadcast_source": sender.source if sender else None,
                       "network": link.source})  # fmt: skip
    return checks


def own_cost_words(row) -> str:
    """'; and its own cost …, added' after ZeRO-1's why, where a frame's row added it (`zero_own_ms` > 0)."""
    own = row.get("zero_own_ms", 0.0)  # 0: not measured, or a CPU's left out of a GPU's step (said apart)
    return f"; and its own cost at one rank beyond DDP's, {ms_text(own)} ms, added" if own > 0 else ""
