"""FSDP2's step (`fsdp`: `fully_shard` on each block and on the root) at world sizes you cannot run.

FSDP shards every parameter, gradient and optimizer state n ways. Before a block's forward every rank
all-gathers the block's parameters (again before its backward when it reshards after forward); after the
block's backward it reduce-scatters the block's gradients; the optimizer steps 1/n of every parameter. The
step is a schedule of those collectives against the block-by-block compute that the gradient profile
measured at world size 1 (`harness.measure.gradprofile`: each parameter's block, when forward first used it,
when its gradient was ready):

- units: the model's blocks, in the order forward uses them, and the root, which holds the rest (embeddings,
  heads, tied weights): gathered once at the start of forward and kept through backward, as FSDP2 keeps it;
- compute: a block's forward runs from its first use to the next block's (the last block's to the end of
  forward, the head's included); its backward from the block after it's last gradient to its own last (the
  last block's from the end of the head's backward; the root's after the first block's);
- a gather is issued when the previous unit's compute begins (FSDP2 prefetches one ahead: its all-gather
  stream waits for the previous gather's copy-out), and a block computes once its gather has ended; the
  first backward gather is issued when backward reaches its block;
- a block's reduce-scatter is issued when its backward ends, the root's when backward ends;
- collectives run one at a time, in the order issued (the all-gather and reduce-scatter streams share the
  network's links);
- blocking (gloo on the CPU, where each collective is a call the only thread waits in): nothing overlaps.

    step = max(end of compute, end of the last reduce-scatter) + optimizer / n + FSDP's own cost

FSDP's own cost is what it adds at one rank, where nothing is communicated (its hooks, the sharded
optimizer's dispatch; at one rank torch skips the gathers and their copies): its step there minus the
baseline's, where the run measured both.

Frozen parameters are gathered with their block, never reduce-scattered. Not modelled: the copy into and out
of each gather's buffer, mixed precision (bf16 gathers), the padding of each parameter to a multiple of n, and
how that own cost changes with n.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.perfmodel.schedule import Grad, Profile

# ---------------------------------------------------------------- the profile's units


@dataclasses.dataclass(frozen=True)
class Unit:
    name: str  # the root, or the block's parameters' common prefix
    nbytes: int  # gathered: every parameter it holds, frozen ones too
    forward_s: float
    backward_s: float
    scattered: int  # its gradients' bytes, reduce-scattered
    in_backward: bool = True  # backward runs through it (else, frozen and before anything trained: never)


@dataclasses.dataclass(frozen=True)
class Units:
    root: Unit  # forward: before the first block; backward: after the first block's
    blocks: tuple[Unit, ...]  # in forward order
    head_backward_s: float  # backward before the last block's, the root's too

    @property
    def compute_s(self) -> float:
        return sum(u.forward_s + u.backward_s for u in (self.root, *self.blocks)) + self.head_backward_s


def units(profile: Profile) -> Units | None:
    """The profile's units with their compute; None where no block holds a trained parameter, or a block's
    forward never ran (a profile stored before per-block times were). A block of frozen parameters only is
    gathered for forward, and for backward where something trained runs before it (backward runs through
    it then); its own backward time is inside its neighbours'."""
    trained = {g.index for g in profile.grads}
    by_block: dict[int, list[Grad]] = {}
    for grad in (*profile.grads, *profile.frozen):
        if grad.block is not None:
            by_block.setdefault(grad.block, []).append(grad)
    starts = {b: min((g.used_s for g in gs if g.used_s is not None), default=None) for b, gs in by_block.items()}
    ends = {b: max(g.ready_s for g in gs if g.index in trained) for b, gs in by_block.items()
            if any(g.index in trained for g in gs)}  # fmt: skip
    if not ends or None in starts.values():
        return None
    order = sorted(by_block, key=starts.get)
    root = [g for g in (*profile.grads, *profile.frozen) if g.block is None]
    last = [b for b in order if b in ends][-1]
    after_last = [g.ready_s for g in root if g.index in trained and g.used_s is not None and g.used_s >= starts[last]]
    head_backward = min(max(after_last, default=0.0), ends[last])
    forward_ends = [starts[b] for b in order[1:]] + [profile.forward_s]
    first_trained = min([g.used_s for g in profile.grads if g.used_s is not None], default=0.0)
    blocks, begins = [], head_backward
    for b, end in reversed(list(zip(order, forward_ends, strict=True))):
        backward = max(ends[b] - begins, 0.0) if b in ends else 0.0
        begins = ends.get(b, begins)
        blocks.append(Unit(_prefix(by_block[b]), _bytes(by_block[b]), max(end - starts[b], 0.0), backward,
                           _bytes(by_block[b], trained), b in ends or starts[b] > first_trained))  # fmt: skip
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

    @property
    def exposed_s(self) -> float:
        """The step beyond compute, the optimizer and FSDP's own cost: the communication nothing hid."""
        return self.step_s - self.compute_s - self.optimizer_s - self.own_s


class _Network:
    """Collectives one at a time, in the order issued."""

    def __init__(self) -> None:
        self.free_s = 0.0

    def send(self, issued_s: float, duration_s: float) -> float:
        """When a collective issued at `issued_s` ends (one of nothing, as it is issued)."""
        if duration_s <= 0:
            return issued_s
        self.free_s = max(issued_s, self.free_s) + duration_s
        return self.free_s


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
    regathered = [k for k, u in enumerate(every) if k and u.in_backward] if reshard_after_forward else []
    network = _Network()
    clock = _forward(found, ags, network, blocking)
    clock = _backward(found, ags, rss, network, clock, blocking=blocking, regathered=regathered)
    optimizer = profile.optimizer_s / max(world_size, 1)
    holding = [k for k, u in enumerate(every) if u.nbytes]  # a root that holds nothing (an MLP's) gathers nothing
    return FsdpStep(max(clock, network.free_s) + optimizer + own_s, found.compute_s, optimizer,
                    sum(ags) + sum(ags[k] for k in regathered), sum(rss),
                    len(holding) + len([k for k in regathered if every[k].nbytes]), len(holding), own_s)  # fmt: skip


def _forward(found: Units, ags: list[float], network: _Network, blocking: bool) -> float:
    """The end of forward: each unit's gather issued as the previous unit's compute begins (blocking: as the
    thread reaches the unit), its compute once the gather has ended."""
    clock, began = 0.0, 0.0
    for unit, gather_s in zip((found.root, *found.blocks), ags, strict=True):
        gathered = network.send(clock if blocking else began, gather_s)
        began = max(clock, gathered)
        clock = began + unit.forward_s
    return clock


def _backward(found: Units, ags, rss, network: _Network, clock: float, *, blocking: bool, regathered) -> float:
    """The end of backward's compute (blocking: of its last reduce-scatter too). Not blocking, a block's
    backward begins by issuing the next regathered block's gather, and ends by issuing its reduce-scatter.
    `regathered`: the units (by index, the root 0) gathered again for backward."""
    clock += found.head_backward_s
    order = [(k, found.blocks[k - 1]) for k in range(len(found.blocks), 0, -1) if found.blocks[k - 1].in_backward]
    again = [k for k, _ in order if k in regathered]
    prefetched: dict[int, float] = {}
    for k, unit in order:
        if k in again:
            gathered = prefetched.pop(k) if k in prefetched else network.send(clock, ags[k])
            clock = max(clock, gathered)
            later = again[again.index(k) + 1 :]
            if not blocking and later:
                prefetched[later[0]] = network.send(clock, ags[later[0]])
        clock += unit.backward_s
        scattered = network.send(clock, rss[k])
        clock = scattered if blocking else clock
    clock += found.root.backward_s
    scattered = network.send(clock, rss[0])
    return scattered if blocking else clock


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


def with_fsdp(frame, profile: Profile, *, link, world_size: int, own_s: float = 0.0):
    """A cluster frame (one row per cap) with FSDP2's step on `link` (a cluster's: NCCL overlaps), the same at
    every cap: FSDP has no buckets; and `fsdp_kept_step_ms`, its step with `reshard_after_forward=false` (each
    block gathered once, kept from forward to backward)."""
    step = predict_fsdp(profile, gather=link, scatter=link, world_size=world_size, own_s=own_s)
    kept = predict_fsdp(profile, gather=link, scatter=link, world_size=world_size, own_s=own_s,
                        reshard_after_forward=False)  # fmt: skip
    return frame.assign(**fsdp_columns(step), fsdp_kept_step_ms=kept.step_s * 1e3 if kept else float("nan"))


def own_cost_s(configs, setup: dict) -> float | None:
    """FSDP's own cost at one rank: its step there (no option set, repeats pooled) minus the baseline's (≥ 0);
    None where the run lacks either."""
    from harness.analysis import roles, stats
    from harness.perfmodel import predict
    from harness.results.values import options_of

    rows = predict.setup_rows(configs, setup)
    rows = rows[roles.shards_parameters(rows) & (rows["world_size"] == 1) & ~rows["impl_options"].map(options_of)
                .astype(bool)]  # fmt: skip
    baseline_s = predict.one_rank_baseline_s(configs, setup)
    if rows.empty or not baseline_s:
        return None
    return max(0.0, stats.geometric_mean(rows["step_ms_median"]) / 1e3 - baseline_s)


def compute_only(profile: Profile, configs, setup: dict) -> Profile:
    """The profile scaled to the run's one-rank step as DDP's is (`predict.run_calibration`), without DDP's own
    cost, which FSDP does not pay."""
    from harness.perfmodel import predict
    from harness.perfmodel.schedule import Calibration, calibrate

    scale = predict.run_calibration(configs, setup, profile=profile).compute_scale
    return calibrate(profile, Calibration(compute_scale=scale))


def for_cluster(raw: Profile, calibration, *, configs, setup, run_scale: float, carried: bool
                ) -> tuple[Profile, float, str]:  # fmt: skip
    """The profile and FSDP's own cost as a cluster prediction takes them, and what was left out: the profile
    calibrated as DDP's is, less DDP's own cost; FSDP's own cost measured at one rank in the run (`own_cost_s`),
    scaled with the compute where --local-step-ms scales it (`run_scale`: the run's own scale), left out where
    it is a CPU's and the compute a GPU's (not `carried`, as DDP's own cost is)."""
    from harness.perfmodel.schedule import calibrate

    own_s = own_cost_s(configs, setup) if configs is not None else None
    left_out = f"FSDP's own cost at one rank, {own_s * 1e3:.3g} ms, a CPU's, left out" if own_s and not carried else ""
    scaled = calibration.compute_scale / run_scale if run_scale else 1.0
    own_s = (own_s or 0.0) * scaled if carried else 0.0
    return calibrate(raw, dataclasses.replace(calibration, reducer_s=0.0)), own_s, left_out


def run_checks(configs, profiles, network) -> list[dict]:
    """Per FSDP configuration (`roles.shards_parameters`) of a run at world size ≥ 2 with a stored profile (with
    per-block times) and no option but those modelled: measured (the geometric mean of its repeats' medians) against
    predicted from the profile scaled to the run's one-rank rows, its gathers and reduce-scatters on the
    collectives run's fits (else the all-reduce's α and bus bandwidth); every call blocks on the CPU."""
    from harness.analysis import roles, stats
    from harness.perfmodel import predict
    from harness.perfmodel.network import sharded_links
    from harness.results.values import options_of

    rows = configs.fillna(predict.SETUP_DEFAULTS)
    options = rows["impl_options"].map(options_of)
    rows = rows[roles.shards_parameters(rows) & (rows["status"] == "ok") & (rows["world_size"] > 1)
                & options.map(lambda o: set(o) <= MODELLED_OPTIONS) & rows["step_ms_median"].notna()]  # fmt: skip
    checks = []
    keys_of = ["impl", "impl_options", "world_size", "device", *predict.SETUP_KEYS]
    for (impl, impl_options, world, device, *keys), group in rows.groupby(keys_of):
        setup = dict(zip(predict.SETUP_KEYS, keys, strict=True))
        profile = predict.profile_for(profiles, setup)
        if profile is None or not network.links or units(profile) is None:
            continue
        gather, scatter = sharded_links(network, int(world))
        step = predict_fsdp(compute_only(profile, configs, setup), gather=gather, scatter=scatter,
                            world_size=int(world), blocking=device == "cpu",
                            reshard_after_forward=options_of(impl_options).get("reshard_after_forward", True),
                            own_s=own_cost_s(configs, setup) or 0.0)  # fmt: skip
        checks.append({**setup, "impl": impl, "world_size": int(world), "impl_options": impl_options,
                       "measured_ms": stats.geometric_mean(group["step_ms_median"]), "predicted_ms": step.step_s * 1e3,
                       "compute_ms": step.compute_s * 1e3, "blocking": device == "cpu",
                       **fsdp_columns(step), "gather_source": gather.source,
                       "scatter_source": scatter.source})  # fmt: skip
    return checks
