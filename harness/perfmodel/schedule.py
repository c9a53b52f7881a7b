"""Predicted step time per bucket cap at world sizes you cannot run: DDP's bucket schedule, simulated.

Its inputs: a gradient-ready profile (`harness.measure.gradprofile`, stored with a run): forward,
backward and optimizer times at world size 1 and when each gradient is ready during backward;
and the network (`harness.perfmodel.network`): one all-reduce's cost, and contention.

The simulation assigns gradients to buckets as DDP's reducer does after its rebuild
(`harness.bucketing`: in the order gradients became ready, a first bucket capped at the
first-bucket size, per dtype, never splitting a parameter), starts a bucket's all-reduce when
its last gradient is ready and the previous all-reduce has finished, and gives step = forward +
max(end of backward, end of the last all-reduce) + optimizer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import pandas as pd

from harness import bucketing
from harness.perfmodel.network import NO_CONTENTION, Contention, Link

# ---------------------------------------------------------------- the profile and DDP's buckets


@dataclasses.dataclass(frozen=True)
class Grad:
    index: int  # registration order
    nbytes: int
    dtype: str
    ready_s: float  # after backward began
    name: str = ""  # the parameter's (a stored profile has it): the why names the gradients ready last
    used_s: float | None = None  # when forward first used it, after forward began (None: unknown, older profile)
    block: int | None = None  # the model's block holding it; None: the root's (or unknown)


@dataclasses.dataclass(frozen=True)
class Profile:
    forward_s: float
    backward_s: float
    optimizer_s: float
    grads: tuple[Grad, ...]  # in the order they became ready
    frozen: tuple[Grad, ...] = ()  # parameters without a gradient (ready_s NaN): sharded strategies still move them

    @property
    def grad_bytes(self) -> int:
        return sum(g.nbytes for g in self.grads)

    @property
    def local_step_s(self) -> float:
        return self.forward_s + self.backward_s + self.optimizer_s


def profile_from_rows(rows: pd.DataFrame) -> Profile:
    """A stored profile (one row per parameter, see harness.results.model_tables.GRADPROFILE_SCHEMA) as a Profile."""
    trains = rows["requires_grad"].astype(bool)
    ordered = rows[trains].sort_values(["ready_ms", "param_index"], ascending=[True, False])
    grads = tuple(_grad(r) for r in ordered.itertuples())
    frozen = tuple(_grad(r) for r in rows[~trains].sort_values("param_index").itertuples())
    first = rows.iloc[0]
    return Profile(first["forward_ms"] / 1e3, first["backward_ms"] / 1e3, first["optimizer_ms"] / 1e3, grads, frozen)


def _grad(r) -> Grad:
    return Grad(
        int(r.param_index),
        int(r.bytes),
        str(r.param_dtype),
        _known(r.ready_ms, 1e-3, default=float("nan")),  # a frozen parameter is never ready
        str(getattr(r, "param_name", "") or ""),  # rows made without names (tests, older tools) have none
        _known(getattr(r, "used_ms", None), 1e-3),  # nor per-block forward (profiles before them)
        _known(getattr(r, "block", None), 1, int),
    )


def _known(value, scale: float, kind=float, default=None):
    return default if value is None or pd.isna(value) else kind(value * scale)


@dataclasses.dataclass(frozen=True)
class StepPrediction:
    step_s: float
    backward_end_s: float  # after backward began
    comm_end_s: float
    buckets: int
    comm_s: float  # sum of all-reduce times without contention
    last_bucket: tuple[Grad, ...] = ()  # the bucket ready last, whose all-reduce ends the step's communication
    last_comm_s: float = 0.0  # its all-reduce, without contention
    exposing: tuple[Grad, ...] = ()  # the bucket whose all-reduce runs longest after backward ends
    exposing_s: float = 0.0  # that part of its all-reduce, wall time after backward ends
    exposing_ready: float = 1.0  # when its last gradient is ready, as a share of backward

    @property
    def exposed_comm_s(self) -> float:
        return max(0.0, self.comm_end_s - self.backward_end_s)


def simulate(
    profile: Profile,
    buckets: Sequence[Sequence[Grad]],
    *,
    link: Link,
    world_size: int,
    contention: Contention = NO_CONTENTION,
) -> StepPrediction:
    """One training step: backward progresses through its gradients while the buckets'
    all-reduces run one after another, each starting when its last gradient is ready and
    the previous one is done. With contention, whichever of the two overlaps the other runs
    at 1/slowdown of its own speed, so time advances event by event."""
    # A gradient cannot be ready after backward ends (medians of separate steps can say so).
    ready = [min(profile.backward_s, max(g.ready_s for g in bucket)) for bucket in buckets]
    costs = [link.allreduce_s(sum(g.nbytes for g in bucket), world_size) for bucket in buckets]
    slowdowns = comm_slowdowns(costs, link, world_size, contention)
    backward_end, comm_end, spans = _overlap(profile.backward_s, ready, costs, slowdowns, contention.compute_slowdown)
    step = profile.forward_s + max(backward_end, comm_end) + profile.optimizer_s
    last = tuple(buckets[-1]) if buckets else ()
    after = [max(0.0, end - max(start, backward_end)) for start, end in spans]  # each one's part exposed
    k = max(range(len(after)), key=lambda i: (after[i], i), default=None)  # ties: the later bucket
    exposing = (
        ()
        if k is None
        else (tuple(buckets[k]), after[k], ready[k] / profile.backward_s if profile.backward_s > 0 else 1.0)
    )
    return StepPrediction(step, backward_end, comm_end, len(buckets), sum(costs), last, costs[-1] if costs else 0.0,
                          *exposing)  # fmt: skip


EPS = 1e-12


def comm_slowdowns(costs: list[float], link: Link, world_size: int, contention: Contention) -> list[float]:
    """Each bucket's all-reduce slowdown while backward computes. With the latency measured apart (a 4 KiB
    all-reduce), the probe's slowdown splits in two: its latency part (α, at `latency_slowdown`) and the
    rest, at what keeps the probe's message as slow as measured; a bucket pays each part in its own
    proportion, so many small buckets pay the latency's far larger slowdown per call. Else one slowdown
    for every bucket. Contention is measured only with a fitted α–β link (a collectives run)."""
    if contention.latency_slowdown is None:
        return [contention.comm_slowdown] * len(costs)
    probe = link.allreduce_s(contention.probe_bytes, world_size)
    probe_latency = min(link.alpha_s, probe)
    rest = probe - probe_latency
    bandwidth = max(1.0, (contention.comm_slowdown * probe - contention.latency_slowdown * probe_latency) / rest
                    ) if rest > 0 else contention.comm_slowdown  # fmt: skip
    slowdowns = []
    for cost in costs:
        latency = min(link.alpha_s, cost)
        paid = latency * contention.latency_slowdown + (cost - latency) * bandwidth
        slowdowns.append(paid / cost if cost > 0 else 1.0)
    return slowdowns


def _overlap(
    backward_s: float, ready: list[float], costs: list[float], slowdowns: list[float], compute_slowdown: float
) -> tuple[float, float, list[tuple[float, float]]]:
    """(end of backward, end of the last all-reduce, each all-reduce's (start, end)) in wall time after backward
    began.

    `ready` is in backward's own time (its progress when it runs alone), `costs` are solo
    all-reduce times, `slowdowns` theirs while backward computes (compute's is `compute_slowdown`
    while one is in flight); buckets launch in their order, one in flight at a time.
    """
    now, progress = 0.0, 0.0  # wall clock; backward's progress in its own seconds
    backward_end = 0.0 if backward_s <= 0 else None
    comm_end = 0.0
    pending = list(zip(ready, costs, slowdowns, strict=True))
    in_flight: float | None = None  # solo seconds left of the all-reduce in flight
    slowdown = 1.0  # the one in flight's, while backward computes
    spans: list[tuple[float, float]] = []
    while pending or in_flight is not None:
        if in_flight is None and pending[0][0] <= progress + EPS:  # its last gradient is ready: launch
            _, in_flight, slowdown = pending.pop(0)
            spans.append((now, now))
            continue
        computing = progress < backward_s - EPS
        compute_rate = 1.0 / compute_slowdown if in_flight is not None else 1.0
        comm_rate = 1.0 / slowdown if computing else 1.0
        horizons = []
        if computing:  # to the end of backward, or to the next launch when nothing is in flight
            goal = backward_s if in_flight is not None else min(pending[0][0], backward_s)
            horizons.append((goal - progress) / compute_rate)
        if in_flight is not None:
            horizons.append(in_flight / comm_rate)
        dt = min(horizons)
        now += dt
        if computing:
            progress += dt * compute_rate
            if progress >= backward_s - EPS:
                progress, backward_end = backward_s, now
        if in_flight is not None:
            in_flight -= dt * comm_rate
            if in_flight <= EPS:
                in_flight, comm_end = None, now
                spans[-1] = (spans[-1][0], now)
    if backward_end is None:
        backward_end = now + (backward_s - progress)
    return backward_end, comm_end, spans


def bucket_layout(
    profile: Profile, cap_mb: float, *, cap_given: bool = True, first_cap_mb: float | None = None
) -> list[list[Grad]]:
    """The profile's gradients in DDP's buckets at this cap (harness.bucketing, as DDP's rebuild lays them);
    `cap_given` false: DDP's default layout, whose first bucket torch may cap apart; `first_cap_mb`: the first
    bucket's cap as a run recorded it (its `first_bucket_cap_mb`), in place of the installed torch's rule."""
    cap_bytes = int(cap_mb * bucketing.MIB)
    if first_cap_mb is None:
        first = bucketing.first_bucket_bytes(cap_bytes, cap_given=cap_given)
    else:
        first = round(first_cap_mb * bucketing.MIB)
    grads = profile.grads
    layout = bucketing.assign_buckets(
        [g.nbytes for g in grads], [g.dtype for g in grads], cap_bytes=cap_bytes, first_cap_bytes=first
    )
    return [[grads[i] for i in bucket] for bucket in layout]


class Parameters(NamedTuple):
    """Another size's parameters (the full size's, counted on the meta device), each in registration order (its
    `index`), with its bytes, dtype and block: when forward uses it and when backward makes its gradient are not
    known (`ready_s` NaN)."""

    trained: tuple[Grad, ...]
    frozen: tuple[Grad, ...] = ()

    @property
    def grad_bytes(self) -> int:
        return sum(g.nbytes for g in self.trained)


def parameters_of(table: Sequence[tuple]) -> Parameters:
    """Parameters from (bytes, dtype, trains, block, name) rows in registration order (modelinfo.parameter_table;
    a row without its name, as before the table carried one, names none)."""
    every = [(Grad(k, nbytes, dtype, float("nan"), name=str(name[0]) if name else "", block=block), trains)
             for k, (nbytes, dtype, trains, block, *name) in enumerate(table)]  # fmt: skip
    return Parameters(tuple(g for g, trains in every if trains), tuple(g for g, trains in every if not trains))


@dataclasses.dataclass(frozen=True)
class StepFloor:
    """The least a step can take with another model's gradients on a profile's compute (`floor_with`)."""

    buckets: int
    comm_s: float  # every bucket's all-reduce, one after another, without contention
    last_s: float  # the last bucket's: it holds the gradients backward makes last
    step_s: float  # at least
    compute_s: float  # forward + backward + optimizer: the step with nothing exposed
    bucket_bytes: tuple[int, ...] = ()  # each bucket's, in the order they are sent
    last_largest: tuple[str, int] = ("", 0)  # the last bucket's largest gradient: its name ('' unnamed), its bytes

    @property
    def exposed_s(self) -> float:
        """At least this much communication backward cannot hide."""
        return self.step_s - self.compute_s


def floor_with(profile: Profile, params: Parameters, *, cap_mb: float, link: Link, world_size: int,
               cap_given: bool = True) -> StepFloor:  # fmt: skip
    """DDP's step floor with another size's trained `params` (their bytes and dtypes known, not when each is
    made) on the profile's compute. They are bucketed in the order backward makes them, taken as reverse
    registration order, as DDP's rebuild lays them out by the order they became ready; the all-reduces run one
    after another, none before backward starts and the last not before the profile's last gradient is made (the
    first registered are made last, at both sizes). So:
    step ≥ forward + max(backward, every all-reduce, last gradient made + the last all-reduce) + optimizer."""
    sizes, dtypes = [g.nbytes for g in params.trained], [g.dtype for g in params.trained]
    cap_bytes = int(cap_mb * bucketing.MIB)
    first = bucketing.first_bucket_bytes(cap_bytes, cap_given=cap_given)
    reverse = range(len(sizes) - 1, -1, -1)
    layout = bucketing.assign_buckets(sizes, dtypes, cap_bytes=cap_bytes, first_cap_bytes=first, order=reverse)
    sent = tuple(sum(sizes[i] for i in bucket) for bucket in layout)
    costs = [link.allreduce_s(nbytes, world_size) for nbytes in sent]
    last_made = min(profile.backward_s, max((g.ready_s for g in profile.grads), default=profile.backward_s))
    last = costs[-1] if costs else 0.0
    end = max(profile.backward_s, sum(costs), last_made + last)
    largest = max((params.trained[i] for i in layout[-1]), key=lambda g: g.nbytes, default=None) if layout else None
    return StepFloor(len(layout), sum(costs), last, profile.forward_s + end + profile.optimizer_s, profile.local_step_s,
                     sent, (largest.name or "", largest.nbytes) if largest else ("", 0))  # fmt: skip


def largest_bucket_bytes(profile: Profile, caps_mb: Sequence[float]) -> int:
    """The largest all-reduce any of these caps sends (what a fitted network must have measured)."""
    return max((sum(g.nbytes for g in b) for cap in caps_mb for b in bucket_layout(profile, cap)), default=0)


def predict_cap(
    profile: Profile,
    *,
    cap_mb: float,
    link: Link,
    world_size: int,
    contention: Contention = NO_CONTENTION,
    cap_given: bool = True,
) -> StepPrediction:
    layout = bucket_layout(profile, cap_mb, cap_given=cap_given)
    return simulate(profile, layout, link=link, world_size=world_size, contention=contention)


def predict_caps(
    profile: Profile,
    *,
    caps_mb: Sequence[float],
    link: Link,
    world_size: int,
    contention: Contention = NO_CONTENTION,
) -> pd.DataFrame:
    """Predicted step per cap, with scaling efficiency against the profile's one-rank step."""
    rows = []
    for cap in caps_mb:
        step = predict_cap(profile, cap_mb=cap, link=link, world_size=world_size, contention=contention)
        rows.append(
            {
                "bucket_cap_mb": float(cap),
                "buckets": step.buckets,
                "step_ms": step.step_s * 1e3,
                "exposed_comm_ms": step.exposed_comm_s * 1e3,
                "comm_ms": step.comm_s * 1e3,
                "scaling_efficiency": profile.local_step_s / step.step_s,
                **last_bucket_columns(step),
            }
        )
    return pd.DataFrame(rows)


def last_bucket_columns(step: StepPrediction) -> dict:
    """The bucket ready last (its MiB, its all-reduce's ms, its largest gradient's name, '' where the profile has no
    names, and how many gradients it holds) and, for the why, the bucket that exposes the most: its all-reduce's ms
    after backward ends, when in backward its last gradient is ready, its MiB and largest gradient."""
    grads = sorted(step.last_bucket, key=lambda g: -g.nbytes)
    most = sorted(step.exposing, key=lambda g: -g.nbytes)
    return {"last_bucket_mb": sum(g.nbytes for g in grads) / bucketing.MIB, "last_allreduce_ms": step.last_comm_s * 1e3,
            "last_bucket_largest": grads[0].name if grads else "", "last_bucket_tensors": len(grads),
            "exposing_bucket_mb": sum(g.nbytes for g in most) / bucketing.MIB, "exposing_ms": step.exposing_s * 1e3,
            "exposing_largest": most[0].name if most else "", "exposing_ready": step.exposing_ready}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Calibration:
    """What a plain model's profile cannot see, measured where nothing is communicated.

    compute_scale: a step measured apart (the run's `local` step at world size 1, or a GPU's step the
    user knows: `predict --local-step-ms`) over the profile's step.
    reducer_s: DDP's own cost with nothing to communicate (`stock` minus `local` at world size 1:
    copying gradients into buckets and back, its hooks), spent during backward.
    optimizer_s: the optimizer's step, where the user gave it apart from the compute it scales.
    """

    compute_scale: float = 1.0
    reducer_s: float = 0.0
    optimizer_s: float | None = None  # the optimizer's step as given apart (--local-optimizer-ms); None: scaled


def scaled_words(scale: float | None = None, run_scale: float | None = None) -> str:
    """'scaled ×4.93 from the run's step to yours': how an own cost a CPU measured at one rank is scaled to a GPU step
    given, as the compute is: its scale there over the run's (own_costs.fsdp_for_cluster,
    own_costs.zero_for_cluster). With `run_scale` (the profile's own calibration to the run's step) where it is not
    1, why the compute's scale, said on the same page, differs: a page said ×0.259 here, ×0.2441 there, unexplained."""
    said = f"scaled{f' ×{scale:.3g}' if scale else ''} from the run's step to yours"
    if scale and run_scale and abs(run_scale - 1.0) > 0.005:
        said += (f" (the profile's compute is scaled ×{scale * run_scale:.4g}: this ×{scale:.3g} times the "
                 f"×{run_scale:.3g} that first matched the profile to the run's own step)")  # fmt: skip
    return said


SCALED = scaled_words()
ON_YOUR_STEP = "on your step"
"""How an own cost scaled by scaled_words is said beside its figure: the scale's chain once, apart (a page said it
twice in a sentence: '×0.00388 from the run's step to yours (… this ×0.00388 times the ×32.8 …)')."""


def calibrate(profile: Profile, calibration: Calibration) -> Profile:
    """The profile with compute scaled and backward stretched by the reducer's cost (ready times alike; forward's
    first uses scaled)."""
    scale = calibration.compute_scale
    backward = profile.backward_s * scale
    stretch = (backward + calibration.reducer_s) / backward if backward > 0 else 1.0
    grads, frozen = (tuple(dataclasses.replace(g, ready_s=g.ready_s * scale * stretch,
                                               used_s=None if g.used_s is None else g.used_s * scale)
                           for g in params) for params in (profile.grads, profile.frozen))  # fmt: skip
    optimizer = profile.optimizer_s * scale if calibration.optimizer_s is None else calibration.optimizer_s
    return Profile(profile.forward_s * scale, backward + calibration.reducer_s, optimizer, grads, frozen)
