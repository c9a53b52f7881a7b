"""FSDP2's step (`fsdp`: `fully_shard` on each block and on the root) at world sizes you cannot run.

FSDP shards every parameter, gradient and optimizer state n ways. Before a block's forward every rank
all-gathers the block's parameters (again before its backward when it reshards after forward); after the
block's backward it reduce-scatters the block's gradients; the optimizer steps 1/n of every parameter. The
step is a schedule of those collectives against the block-by-block compute that the gradient profile
measured at world size 1 (`harness.measure.gradprofile`: each parameter's block, when forward first used it,
when its gradient was ready), following what torch's FSDP2 issues and when:

- units: the model's blocks, in the order forward uses them, and the root, which holds the rest (embeddings,
  heads, tied weights): gathered once at the start of forward and kept through backward, as FSDP2 keeps it;
- compute: a block's forward runs from its first use to the next block's (the last block's to the end of
  forward, the head's included); its backward from the block after it's last gradient to its own last (the
  last block's from the end of the head's backward; the root's after the first block's);
- forward: each unit's gather is issued as soon as the host reaches it (on a GPU the host runs ahead) but
  starts only once the gather two units back has been copied out, at that unit's start (FSDP2 frees each
  gather's buffer one copy-out later), and a unit computes once its gather has ended;
- backward: the root's pre-backward hook, at backward's start, issues the last block's gather; each block's,
  once its own gather has ended, issues the previous block's (whether or not backward runs through it: a
  frozen stem is gathered and discarded);
- a block's reduce-scatter is issued when its backward ends; the root's at backward's end, and so is that
  of a block whose forward inputs need no gradient (nothing trained ran before it), whose post-backward hook
  autograd never calls;
- collectives run one at a time, in the order issued (the all-gather and reduce-scatter streams share the
  network's links);
- blocking (gloo on the CPU, where each collective is a call the only thread waits in): nothing overlaps.
    step = max(end of compute, end of the last reduce-scatter) + optimizer / n + FSDP's own cost

FSDP's own cost is its step at one rank, where nothing is communicated, minus the baseline's: FSDP's hooks, the
sharded optimizer's dispatch and the copies (torch still copies each parameter into its unsharded buffer and each
gradient through the reduce-scatter's). Frozen parameters are gathered with their block, never reduce-scattered.
Another size's parameters (the full size's) give a floor under the step (`floor_with`). Not modelled: how the
copies and that own cost change with n, mixed precision (bf16 gathers), the padding of each parameter to a
multiple of n, and a host that does not run ahead (many small blocks on a GPU).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

from harness.perfmodel.schedule import Grad, Profile

# ---------------------------------------------------------------- the profile's units


@dataclasses.dataclass(frozen=True)
class Unit:
    name: str  # the root, or the block's parameters' common prefix
    nbytes: int  # gathered: every parameter it holds, frozen ones too
    forward_s: float
    backward_s: float
    scattered: int  # its gradients' bytes, reduce-scattered
    in_backward: bool = True  # backward runs through it (else frozen, before anything trained: never; yet the
    # unit just before the first trained one is gathered for backward all the same, by that one's prefetch)
    scattered_last: bool = False  # nothing trained ran before it: its reduce-scatter waits for backward's end


@dataclasses.dataclass(frozen=True)
class Units:
    root: Unit  # forward: before the first block; backward: after the first block's
    blocks: tuple[Unit, ...]  # in forward order
    head_backward_s: float  # backward before the last block's, the root's too

    @property
    def compute_s(self) -> float:
        return sum(u.forward_s + u.backward_s for u in (self.root, *self.blocks)) + self.head_backward_s


def units(profile: Profile) -> Units | None:
    """The profile's units with their compute; None where no block holds a trained parameter, or forward was
    not timed block by block (a profile stored before it was). A block whose forward never ran is not a unit
    (FSDP gathers nothing for it). A block of frozen parameters only is gathered for forward, and for backward
    where something trained runs before it (backward runs through it then) or where it comes just before the
    first trained block (whose pre-backward prefetches it); its own backward time is inside its neighbours'."""
    trained = {g.index for g in profile.grads}
    every = (*profile.grads, *profile.frozen)
    if all(g.used_s is None for g in every):
        return None
    by_block: dict[int, list[Grad]] = {}
    for grad in every:
        if grad.block is not None:
            by_block.setdefault(grad.block, []).append(grad)
    starts = {b: min(g.used_s for g in gs if g.used_s is not None) for b, gs in by_block.items()
              if any(g.used_s is not None for g in gs)}  # fmt: skip
    ready = {b: [g.ready_s for g in by_block[b] if g.index in trained and not math.isnan(g.ready_s)] for b in starts}
    ends = {b: max(times) for b, times in ready.items() if times}
    if not ends:
        return None
    order = sorted(starts, key=starts.get)
    root = [g for g in every if g.block is None]
    last = [b for b in order if b in ends][-1]
    after_last = [g.ready_s for g in root if g.index in trained and g.used_s is not None and g.used_s >= starts[last]]
    head_backward = min(max(after_last, default=0.0), ends[last])
    forward_ends = [starts[b] for b in order[1:]] + [profile.forward_s]
    first_trained = min([g.used_s for g in profile.grads if g.used_s is not None], default=0.0)
    blocks, begins = [], head_backward
    for b, end in reversed(list(zip(order, forward_ends, strict=True))):
        backward = max(ends[b] - begins, 0.0) if b in ends else 0.0
        begins = max(begins, ends.get(b, begins))  # out of order: no time counted twice
        blocks.append(Unit(_prefix(by_block[b]), _bytes(by_block[b]), max(end - starts[b], 0.0), backward,
                           _bytes(by_block[b], trained), b in ends or starts[b] > first_trained,
                           scattered_last=starts[b] <= first_trained))  # fmt: skip
    first = next(b for b in order if b in ends)
    root_unit = Unit("root", _bytes(root), starts[order[0]], max(profile.backward_s - ends[first], 0.0),
                     _bytes(root, trained))  # fmt: skip
    return Units(root_unit, tuple(reversed(blocks)), head_backward)


def _bytes(params: Sequence[Grad], only: set[int] | None = None) -> int:
    return sum(g.nbytes for g in params if only is None or g.index in only)


def _prefix(grads: Sequence[Grad]) -> str:
    """The parameters' common dotted prefix (`transformer.h.3`), else the first one's index."""
    parts = [g.name.split(".")[:-1] for g in grads if g.name]
    common = []
    for level in zip(*parts, strict=False) if parts else ():
        if len(set(level)) > 1:
            break
        common.append(level[0])
    return ".".join(common) or str(grads[0].index)


# ---------------------------------------------------------------- the schedule


@dataclasses.dataclass(frozen=True)
class FsdpStep:
    step_s: float
    compute_s: float  # forward and backward, without waits
    optimizer_s: float  # on 1/n of every parameter
    gather_s: float  # every all-gather's time, without overlap
    scatter_s: float  # every reduce-scatter's
    gathers: int
    units: int  # those holding parameters
    own_s: float = 0.0  # FSDP's own cost, measured at one rank
    issued: tuple[tuple[str, int], ...] = ()  # (collective, unit: the root 0, block k k + 1), in the order issued
    sent: tuple[tuple[str, int], ...] = ()  # (collective, its bytes: an all-gather's output, a reduce-scatter's input)

    @property
    def exposed_s(self) -> float:
        """The step beyond compute, the optimizer and FSDP's own cost: the communication nothing hid."""
        return self.step_s - self.compute_s - self.optimizer_s - self.own_s


class _Network:
    """Collectives one at a time, in the order issued; what each unit sent, by collective."""

    def __init__(self, blocking: bool) -> None:
        self.blocking = blocking
        self.free_s = 0.0
        self.sent: list[tuple[str, int, float]] = []  # (collective, unit, duration)

    def send(self, op: str, unit: int, issued_s: float, duration_s: float) -> float:
        """When a collective issued at `issued_s` ends (one of nothing, as it is issued)."""
        if duration_s <= 0:
            return issued_s
        self.sent.append((op, unit, duration_s))
        self.free_s = max(issued_s, self.free_s) + duration_s
        return self.free_s

    def spent(self, op: str) -> float:
        return sum(duration for sent_op, _, duration in self.sent if sent_op == op)


def predict_fsdp(profile: Profile, *, gather, scatter, world_size: int, reshard_after_forward: bool = True,
                 blocking: bool = False, own_s: float = 0.0) -> FsdpStep | None:  # fmt: skip
    """FSDP2's step at this world size, the all-gathers on `gather` and the reduce-scatters on `scatter` (links
    with `collective_s`: a run's fits, or a cluster's), FSDP's own cost `own_s` added; None where the profile
    has no per-block times."""
    found = units(profile)
    if found is None:
        return None
    every = (found.root, *found.blocks)  # the root is unit 0, block k is unit k + 1
    ags = [gather.collective_s("all_gather", u.nbytes, world_size) for u in every]
    rss = [scatter.collective_s("reduce_scatter", u.scattered, world_size) for u in every]
    network = _Network(blocking)
    clock = _forward(found, ags, network)
    clock = _backward(found, ags if reshard_after_forward else [0.0] * len(ags), rss, network, clock)
    optimizer = profile.optimizer_s / max(world_size, 1)
    issued = tuple((op, k) for op, k, _ in network.sent)
    sent = tuple((op, every[k].nbytes if op == "all_gather" else every[k].scattered) for op, k in issued)
    return FsdpStep(max(clock, network.free_s) + optimizer + own_s, found.compute_s, optimizer,
                    network.spent("all_gather"), network.spent("reduce_scatter"),
                    [op for op, _ in issued].count("all_gather"), len([u for u in every if u.nbytes]), own_s,
                    issued, sent)  # fmt: skip


def _forward(found: Units, ags: list[float], network: _Network) -> float:
    """The end of forward: unit k's gather starts once unit k − 2 has begun (its gather copied out; blocking:
    once the thread reaches unit k), unit k computes once its gather has ended."""
    clock, began = 0.0, [0.0]
    for k, unit in enumerate((found.root, *found.blocks)):
        issued = clock if network.blocking else began[max(k - 1, 0)]  # began[j + 1]: unit j's start
        began.append(max(clock, network.send("all_gather", k, issued, ags[k])))
        clock = began[-1] + unit.forward_s
    return clock


def _backward(found: Units, ags, rss, network: _Network, clock: float) -> float:
    """The end of backward's compute (blocking: of its last reduce-scatter too). `ags`: each unit's gather
    again for backward (0: kept from forward). The root's pre-backward issues the last block's gather; each
    block's, the previous block's; its post-backward the block's reduce-scatter, or backward's end does."""
    blocks = found.blocks
    gathered: dict[int, float] = {}

    def gather(k: int) -> None:
        nonlocal clock
        if k >= 1 and k not in gathered:
            gathered[k] = network.send("all_gather", k, clock, ags[k])
            clock = gathered[k] if network.blocking else clock

    def scatter(k: int) -> None:
        nonlocal clock
        scattered = network.send("reduce_scatter", k, clock, rss[k])
        clock = scattered if network.blocking else clock

    gather(len(blocks))
    clock += found.head_backward_s
    for k in (k for k in range(len(blocks), 0, -1) if blocks[k - 1].in_backward):
        gather(k)
        clock = max(clock, gathered.get(k, clock))
        gather(k - 1)
        clock += blocks[k - 1].backward_s
        if not blocks[k - 1].scattered_last:
            scatter(k)
    clock += found.root.backward_s
    for k in (0, *(k for k in range(1, len(blocks) + 1) if blocks[k - 1].scattered_last)):
        scatter(k)
    return clock


class FsdpFloor(NamedTuple):
    step_s: float  # at least
    gather_s: float  # every all-gather's time, one after another
    scatter_s: float  # every reduce-scatter's
    collectives: int
    exposed_s: float = float("nan")  # at least: the floor beyond forward and backward, the optimizer's shard and own
    gather_bytes: tuple[int, ...] = ()  # each all-gather's (its output), forward's then backward's again
    scatter_bytes: tuple[int, ...] = ()  # each reduce-scatter's (its input)


def floor_with(profile: Profile, params, *, gather, scatter, world_size: int, reshard_after_forward: bool = True,
               own_s: float = 0.0) -> FsdpFloor:  # fmt: skip
    """FSDP2's step floor with another size's `params` (schedule.Parameters: bytes and blocks known, not when each
    is used or made) on the profile's compute. Each unit (the root, each block) is gathered for forward, each block
    holding a trained parameter again for backward (`reshard_after_forward`), each unit's trained bytes are
    reduce-scattered, one collective at a time; nothing computes before the root's gather, forward ends after every
    forward gather, and the root's reduce-scatter is issued at backward's end. Every block counts as run (the caller
    checks). So, with n ranks: step ≥ max(every collective, root's gather + forward + backward + root's
    reduce-scatter, every forward gather + backward + root's reduce-scatter) + optimizer / n + own cost."""
    units: dict[int | None, list[Grad]] = {None: []}  # the root: what no block holds
    for param in (*params.trained, *params.frozen):
        units.setdefault(param.block, []).append(param)
    trained = {g.index for g in params.trained}
    ags = {k: gather.collective_s("all_gather", _bytes(ps), world_size) for k, ps in units.items() if _bytes(ps)}
    rss = {k: scatter.collective_s("reduce_scatter", _bytes(ps, trained), world_size)
           for k, ps in units.items() if _bytes(ps, trained)}  # fmt: skip
    again = [ags[k] for k in ags if k is not None and k in rss] if reshard_after_forward else []
    forward_gathers, root_scatter, backward = sum(ags.values()), rss.get(None, 0.0), profile.backward_s
    gathered, sent = forward_gathers + sum(again), sum(rss.values())
    end = max(gathered + sent, ags.get(None, 0.0) + profile.forward_s + backward + root_scatter,
              forward_gathers + backward + root_scatter)  # fmt: skip
    gathers = [*ags, *([k for k in ags if k is not None and k in rss] if reshard_after_forward else [])]
    sizes = (tuple(_bytes(units[k]) for k in gathers), tuple(_bytes(units[k], trained) for k in rss))
    return FsdpFloor(end + profile.optimizer_s / max(world_size, 1) + own_s, gathered, sent,
                     len(ags) + len(again) + len(rss), end - profile.forward_s - backward, *sizes)  # fmt: skip


# ---------------------------------------------------------------- a cluster's frame and a run's rows

MODELLED_OPTIONS = {"reshard_after_forward"}  # bf16 gathers or reductions are another step


def fsdp_columns(step: FsdpStep | None) -> dict:
    """FSDP2's step and its parts as the columns `predict --out` writes beside DDP's (NaN: not modelled)."""
    if step is None:
        return dict.fromkeys(("fsdp_step_ms", "fsdp_exposed_ms", "fsdp_gather_ms", "fsdp_scatter_ms",
                              "fsdp_optimizer_ms", "fsdp_own_ms", "fsdp_gathers", "fsdp_units"),
                             float("nan"))  # fmt: skip
    return {"fsdp_step_ms": step.step_s * 1e3, "fsdp_exposed_ms": step.exposed_s * 1e3,
            "fsdp_gather_ms": step.gather_s * 1e3, "fsdp_scatter_ms": step.scatter_s * 1e3,
            "fsdp_optimizer_ms": step.optimizer_s * 1e3, "fsdp_own_ms": step.own_s * 1e3,
            "fsdp_gathers": step.gathers, "fsdp_units": step.units}  # fmt: skip


def with_fsdp(frame, profile: Profile, *, gather, scatter, world_size: int, own_s: float | None = 0.0,
              blocking: bool = False, left_out_s: float = 0.0):  # fmt: skip
    """A frame of DDP's steps (one row per cap) with FSDP2's step, its gathers on `gather` and reduce-scatters on
    `scatter` (a cluster's link for both: NCCL overlaps; or this machine's fits, `blocking` on the CPU), the same
    at every cap: FSDP has no buckets; and `fsdp_kept_step_ms`, its step with `reshard_after_forward=false` (each
    block gathered once, kept from forward to backward). `own_s` None: FSDP's own cost was not added (none
    measured, or a CPU's left out: `fsdp_own_ms` null, not a measured 0); `left_out_s`: how much a left-out one
    was beyond DDP's (`fsdp_own_left_out_ms`, own_costs.FsdpOwnCost.left_out_s)."""
    links = {"gather": gather, "scatter": scatter, "world_size": world_size, "own_s": own_s or 0.0,
             "blocking": blocking}  # fmt: skip
    step = predict_fsdp(profile, **links)
    kept = predict_fsdp(profile, **links, reshard_after_forward=False)
    frame = frame.assign(**fsdp_columns(step), fsdp_kept_step_ms=kept.step_s * 1e3 if kept else float("nan"),
                         fsdp_own_left_out_ms=left_out_s * 1e3 if step else float("nan"))  # fmt: skip
    return frame if own_s is not None else frame.assign(fsdp_own_ms=float("nan"))


def compute_only(profile: Profile, configs, setup: dict) -> Profile:
    """The profile scaled to the run's one-rank step as DDP's is (`predict.run_calibration`), without DDP's own
    cost, which FSDP does not pay: to the baseline's step; where the run has no baseline, to the reference's
    (DDP's own cost then inside the compute, by as much too slow); with neither, as measured."""
    from harness.perfmodel import predict
    from harness.perfmodel.schedule import Calibration, calibrate

    scale = predict.run_calibration(configs, setup, profile=profile).compute_scale
    return calibrate(profile, Calibration(compute_scale=scale))


def run_checks(configs, profiles, network, *, cores: int | None) -> list[dict]:
    """Per FSDP configuration (`roles.shards_parameters`) of a run at world size ≥ 2 with a stored profile (with
    per-block times) and no option but those modelled: measured (the geometric mean of its repeats' medians) against
    predicted from the profile scaled to the run's one-rank rows, its gathers and reduce-scatters on the
    collectives run's fits (else the all-reduce's α and bus bandwidth); every call blocks on the CPU; its compute
    slowed where the ranks outnumber the run's `cores` (predict.core_share), as predict --run prices it."""
    from harness.analysis import roles, stats
    from harness.perfmodel import measured, predict
    from harness.perfmodel.network import fitted_source, network_link, sharded_links
    from harness.results.values import options_of

    rows = configs.fillna(measured.SETUP_DEFAULTS)
    options = roles.beyond_defaults_of(rows)  # torch's defaults asked by name are the model's own step
    rows = rows[roles.shards_parameters(rows) & (rows["status"] == "ok") & (rows["world_size"] > 1)
                & options.map(lambda o: set(o) <= MODELLED_OPTIONS) & rows["step_ms_median"].notna()]  # fmt: skip
    checks = []
    keys_of = ["impl", "impl_options", "world_size", "device", *measured.SETUP_KEYS]
    for (impl, impl_options, world, device, *keys), group in rows.groupby(keys_of):
        setup = dict(zip(measured.SETUP_KEYS, keys, strict=True))
        profile = predict.profile_for(profiles, setup)
        if profile is None or not network.links or units(profile) is None:
            continue
        gather, scatter = sharded_links(network, int(world))
        share = predict.core_share(configs, setup, world=int(world), cores=cores)
        compute = predict.with_shared_cores(compute_only(profile, configs, setup), share)
        step = predict_fsdp(compute, gather=gather, scatter=scatter,
                            world_size=int(world), blocking=device == "cpu",
                            reshard_after_forward=options_of(impl_options).get("reshard_after_forward", True),
                            own_s=measured.fsdp_own_cost_s(configs, setup) or 0.0)  # fmt: skip
        checks.append({**setup, "impl": impl, "world_size": int(world), "impl_options": impl_options,
                       "measured_ms": stats.geometric_mean(group["step_ms_median"]), "predicted_ms": step.step_s * 1e3,
                       "compute_ms": step.compute_s * 1e3, "blocking": device == "cpu",
                       **fsdp_columns(step), "gather_source": fitted_source(gather, "all_gather"),
                       "scatter_source": fitted_source(scatter, "reduce_scatter"),
                       "network": network_link(network, int(world)).source})  # fmt: skip
    return checks
