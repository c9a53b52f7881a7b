"""`bucketed` beyond the common contract: its bucket layout, that it really overlaps, that it launches
in one order on every rank, its readiness-order rebuild, and the edges of gradient accumulation.

The checks that need ranks run once per world size (1 in this process, 2 in the shared
gloo group) and return what they observed; the tests read those observations.
"""

from __future__ import annotations

import contextlib
import functools
import re
from typing import Any

import pytest
import torch
import torch.distributed as dist
from dist_helpers import CLASSES, FEATURES, SometimesExtra, TinyClassification, run_in_process_group
from torch import nn

import impls
from harness.bucketing import MIB, assign_buckets, first_bucket_bytes
from harness.measure.training import LEARNING_RATE, OPTIMIZER, build_model, make_batch
from harness.parity import reference as parity
from harness.protocols import ConfigError
from impls._support.common import nbytes

SEED = 7
BATCH = 4
WIDTH = 32
LAYER_CAP_MB = WIDTH * WIDTH * 4 / MIB
"""One WIDTH×WIDTH float32 weight: a bucket closes at each such layer (DDP closes a bucket once it
holds its cap or more), so Chain's hidden layers get a bucket each."""
BRANCH_CAP_MB = 4 * (FEATURES * WIDTH + WIDTH + WIDTH * CLASSES + CLASSES) / MIB
"""Exactly the float32 parameters of one RankOrderedBranches branch: one bucket per branch."""
CPU = torch.device("cpu")


# ---- models ------------------------------------------------------------------------------------


class Chain(nn.Module):
    """Six layers: with LAYER_CAP_MB five buckets (out shares layers[3]'s), the last layer's bucket first."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.layers = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(4)])
        self.out = nn.Linear(WIDTH, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.inp(x))
        for layer in self.layers:
            h = torch.tanh(layer(h))
        return self.out(h)


class RankOrderedBranches(nn.Module):
    """Two branches whose gradients arrive in a different order on each rank.

    Autograd runs the most recently created node first, so the branch computed second in
    forward gets its gradients first; rank 0 computes `a` first, rank 1 computes `b` first.
    """

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Linear(FEATURES, WIDTH), nn.Tanh(), nn.Linear(WIDTH, CLASSES))
        self.b = nn.Sequential(nn.Linear(FEATURES, WIDTH), nn.Tanh(), nn.Linear(WIDTH, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rank = dist.get_rank() if dist.is_initialized() else 0
        if rank % 2 == 0:
            a = self.a(x)
            return a + self.b(x)
        b = self.b(x)
        return self.a(x) + b


class OutOfOrder(nn.Module):
    """Registered late, middle, early; run early, middle, late: packing order is the wrong way round."""

    def __init__(self) -> None:
        super().__init__()
        self.late = nn.Linear(WIDTH, CLASSES)
        self.middle = nn.Linear(WIDTH, WIDTH)
        self.early = nn.Linear(FEATURES, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.late(torch.tanh(self.middle(torch.tanh(self.early(x)))))


class KnownLayout(nn.Module):
    """Registered f, e, d, c, b, a, so that packing (reverse registration order) sees a, b, c, d, e, f."""

    def __init__(self) -> None:
        super().__init__()
        for name, numel, dtype in reversed(LAYOUT_TENSORS):
            self.register_parameter(name, nn.Parameter(torch.zeros(numel, dtype=dtype)))


# name, elements, dtype — packing order. Caps: first bucket 1000 B, others 2000 B. DDP's rule: a
# tensor joins the open bucket of its dtype, which closes once it holds its cap or more.
LAYOUT_TENSORS = [
    ("a", 100, torch.float32),  # 400 B: below the first bucket's 1000 B
    ("b", 200, torch.float32),  # 800 B: a + b = 1200 B ≥ 1000 B closes the first bucket
    ("c", 300, torch.float32),  # 1200 B: below the 2000 B cap
    ("d", 1000, torch.float32),  # 4000 B: bigger than the cap, joins c (never split) and closes it
    ("e", 50, torch.float64),  # 400 B: float64 opens its own first bucket, left open
    ("f", 100, torch.float32),  # 400 B: float32 again, a new bucket, left open
]
LAYOUT_CAP_BYTES, LAYOUT_FIRST_CAP_BYTES = 2000, 1000
EXPECTED_MEMBERS = [["a", "b"], ["c", "d"], ["e"], ["f"]]
"""Closed buckets launch in the order they closed; open ones follow as DDP's hash table of dtypes holds
them (on a CPU, the dtype first used last comes first: float64's, then float32's), as
torch.distributed._compute_bucket_assignment_by_size returns them for these tensors."""
EXPECTED_SIZES_BYTES = [1200, 5200, 400, 400]


# ---- recording what happens inside backward -----------------------------------------------------


@contextlib.contextmanager
def recording(strategy, model: nn.Module, events: list[tuple[str, Any]]):
    """Append ("launch", bucket index) at each all-reduce and ("grad", name) as each gradient arrives.

    The gradient recorders are registered after the strategy's hooks, so they run after them.
    """
    buffers = {bucket.buffer.data_ptr(): i for i, bucket in enumerate(strategy._buckets)}
    original = dist.all_reduce

    def all_reduce(tensor, *args, **kwargs):
        events.append(("launch", buffers.get(tensor.data_ptr(), "?")))
        return original(tensor, *args, **kwargs)

    handles = [
        p.register_post_accumulate_grad_hook(lambda _, name=name: events.append(("grad", name)))
        for name, p in model.named_parameters()
        if p.requires_grad
    ]
    dist.all_reduce = all_reduce
    try:
        yield
    finally:
        dist.all_reduce = original
        for handle in handles:
            handle.remove()


def wrapped(model_cls: type[nn.Module], **options) -> tuple[Any, nn.Module, TinyClassification]:
    workload = TinyClassification(model=model_cls)
    strategy = impls.create("bucketed", **options)
    model = strategy.wrap(build_model(workload, seed=SEED + dist.get_rank(), device=CPU))
    return strategy, model, workload


def one_step(strategy, model, workload, optimizer, *, step: int, set_to_none: bool = True) -> None:
    batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=dist.get_rank(), step=step, device=CPU)
    workload.loss(model, batch).backward()
    strategy.sync_gradients()
    optimizer.step()
    optimizer.zero_grad(set_to_none=set_to_none)


def events_of_one_backward(strategy, model, workload, optimizer, *, step: int) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    with recording(strategy, model, events):
        batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=dist.get_rank(), step=step, device=CPU)
        workload.loss(model, batch).backward()
        events.append(("backward returned", None))
        strategy.sync_gradients()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return events


# ---- the checks, run on every rank --------------------------------------------------------------


def observe_overlap() -> dict[str, Any]:
    strategy, model, workload = wrapped(Chain, bucket_cap_mb=LAYER_CAP_MB)
    optimizer = OPTIMIZER(model.parameters(), lr=LEARNING_RATE)
    events = [events_of_one_backward(strategy, model, workload, optimizer, step=step) for step in range(2)]
    return {"events": events, "buckets": len(strategy._buckets)}


def observe_rank_dependent_readiness() -> dict[str, Any]:
    strategy, model, workload = wrapped(RankOrderedBranches, bucket_cap_mb=BRANCH_CAP_MB)
    optimizer = OPTIMIZER(model.parameters(), lr=LEARNING_RATE)
    events = [events_of_one_backward(strategy, model, workload, optimizer, step=step) for step in range(3)]
    return {"events": events, "buckets": strategy.bucket_members(), "final": parity.parameters_on_cpu(model)}


def observe_rebuild() -> dict[str, Any]:
    strategy, model, workload = wrapped(OutOfOrder, bucket_cap_mb=LAYER_CAP_MB, rebuild=True)
    optimizer = OPTIMIZER(model.parameters(), lr=LEARNING_RATE)
    members_before = strategy.bucket_members()
    events = [events_of_one_backward(strategy, model, workload, optimizer, step=step) for step in range(3)]
    return {
        "members_before": members_before,
        "members_after": strategy.bucket_members(),
        "events": events,
        "final": parity.parameters_on_cpu(model),
    }


def train_keeping_gradients_allocated(steps: int) -> dict[str, torch.Tensor]:
    """zero_grad(set_to_none=False): .grad stays a tensor (a bucket view) that autograd adds into."""
    strategy, model, workload = wrapped(Chain, bucket_cap_mb=LAYER_CAP_MB)
    optimizer = OPTIMIZER(model.parameters(), lr=LEARNING_RATE)
    for step in range(steps):
        one_step(strategy, model, workload, optimizer, step=step, set_to_none=False)
    return parity.parameters_on_cpu(model)


def train_with_gradient_only_inside_no_sync(steps: int) -> dict[str, torch.Tensor]:
    """`extra` gets its gradient in the first micro-batch (inside no_sync) and none in the last."""
    strategy, model, workload = wrapped(SometimesExtra)
    optimizer = OPTIMIZER(model.parameters(), lr=LEARNING_RATE)
    for step in range(steps):
        accumulate_two_micro_batches(model, workload, rank=dist.get_rank(), step=step, no_sync=strategy.no_sync)
        strategy.sync_gradients()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return parity.parameters_on_cpu(model)


def accumulate_two_micro_batches(model, workload, *, rank: int, step: int, no_sync) -> None:
    for micro in range(2):
        model.use_extra = micro == 0
        batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=rank, step=2 * step + micro, device=CPU)
        with no_sync() if micro == 0 else contextlib.nullcontext():
            workload.loss(model, batch).backward()


def observe_layout() -> dict[str, Any]:
    strategy = impls.create(
        "bucketed", bucket_cap_mb=LAYOUT_CAP_BYTES / MIB, first_bucket_mb=LAYOUT_FIRST_CAP_BYTES / MIB
    )
    strategy.wrap(KnownLayout())
    return {"layout": strategy.layout(), "members": strategy.bucket_members()}


def observe_second_backward_without_sync() -> str:
    strategy, model, workload = wrapped(Chain)
    batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=0, step=0, device=CPU)
    workload.loss(model, batch).backward()
    try:
        workload.loss(model, batch).backward()
    except RuntimeError as exc:
        return str(exc)
    finally:
        strategy.sync_gradients()  # let the launched all-reduces finish before the next check
    return "no error"


STEPS = 4


def observe_everything() -> dict[str, Any]:
    observations = {
        "overlap": observe_overlap(),
        "rank_dependent": observe_rank_dependent_readiness(),
        "rebuild": observe_rebuild(),
        "kept_gradients": train_keeping_gradients_allocated(STEPS),
        "no_sync_only": train_with_gradient_only_inside_no_sync(STEPS),
        "layout": observe_layout(),
    }
    if dist.get_world_size() == 1:
        observations["second_backward"] = observe_second_backward_without_sync()
    return observations


# ---- in the test process -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def observed():
    @functools.cache
    def by_world_size(world_size: int) -> list[dict[str, Any]]:
        return run_in_process_group(observe_everything, world_size=world_size)

    return by_world_size


def reference(model_cls: type[nn.Module], world_size: int, steps: int) -> dict[str, torch.Tensor]:
    return parity.reference_parameters(
        TinyClassification(model=model_cls), world_size=world_size, batch_size=BATCH, steps=steps, seed=SEED, device=CPU
    )


def reference_with_gradient_only_inside_no_sync(world_size: int, steps: int) -> dict[str, torch.Tensor]:
    workload = TinyClassification(model=SometimesExtra)
    model = build_model(workload, seed=SEED, device=CPU)
    optimizer = OPTIMIZER(model.parameters(), lr=LEARNING_RATE)
    for step in range(steps):
        for rank in range(world_size):
            accumulate_two_micro_batches(model, workload, rank=rank, step=step, no_sync=contextlib.nullcontext)
        for p in model.parameters():
            p.grad.div_(world_size)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return parity.parameters_on_cpu(model)


def assert_matches(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    outcome = parity.compare(actual, expected)
    assert outcome.within_tolerance, f"differs by {outcome.max_abs_diff:.3g} in {outcome.worst_parameter}"


def gradients_after_first_launch(events: list[tuple[str, Any]]) -> int:
    """How many gradients arrived after the first all-reduce started.

    The recorder runs after the strategy's hook of the same parameter, so the gradient that
    completed the first bucket is counted too: 1 means no overlap at all.
    """
    kinds = [kind for kind, _ in events]
    return kinds[kinds.index("launch") :].count("grad")


def launch_order(events: list[tuple[str, Any]]) -> list[Any]:
    return [what for kind, what in events if kind == "launch"]


def gradient_order(events: list[tuple[str, Any]]) -> list[Any]:
    return [what for kind, what in events if kind == "grad"]


WORLD_SIZES = [1, 2]


def test_ddp_rules_close_a_bucket_at_its_cap_with_a_smaller_first_bucket_and_dtypes_apart():
    tensors = [torch.zeros(numel, dtype=dtype) for _, numel, dtype in LAYOUT_TENSORS]
    buckets = assign_buckets(
        [nbytes(t) for t in tensors],
        [t.dtype for t in tensors],
        cap_bytes=LAYOUT_CAP_BYTES,
        first_cap_bytes=LAYOUT_FIRST_CAP_BYTES,
    )
    names = [[LAYOUT_TENSORS[i][0] for i in bucket] for bucket in buckets]
    assert names == EXPECTED_MEMBERS


def test_first_bucket_is_never_larger_than_the_cap():
    assert impls.create("bucketed", bucket_cap_mb=800 / MIB, first_bucket_mb=10_000 / MIB).cap_bytes() == (800, 800)
    assert impls.create("bucketed", bucket_cap_mb=800 / MIB, first_bucket_mb=400 / MIB).cap_bytes() == (800, 400)


def test_without_first_bucket_mb_the_first_bucket_has_ddps_cap_for_the_given_bucket_cap():
    cap = 4 * MIB
    assert impls.create("bucketed", bucket_cap_mb=4.0).cap_bytes() == (cap, first_bucket_bytes(cap))


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_layout_reports_bucket_sizes_in_mib_in_launch_order(observed, world_size):
    layout = observed(world_size)[0]["layout"]
    assert layout["members"] == EXPECTED_MEMBERS
    assert layout["layout"]["bucket_sizes_mb"] == pytest.approx([b / MIB for b in EXPECTED_SIZES_BYTES], abs=1e-6)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_first_bucket_is_launched_while_backward_still_produces_gradients(observed, world_size):
    for rank_observed in observed(world_size):
        overlap = rank_observed["overlap"]
        assert overlap["buckets"] == 5  # DDP's packing of Chain at LAYER_CAP_MB
        for events in overlap["events"]:
            assert gradients_after_first_launch(events) > 1, "no all-reduce started before backward's last gradient"
            assert events.index(("launch", 0)) < events.index(("backward returned", None))
            # Each layer's bucket starts as soon as its layer is done: launches interleave with gradients.
            launched_during_backward = events[: events.index(("backward returned", None))]
            assert launch_order(launched_during_backward) == list(range(overlap["buckets"]))


def test_buckets_launch_in_the_same_order_on_every_rank_even_when_gradients_arrive_in_different_orders(observed):
    ranks = observed(2)
    assert [{name[0] for name in bucket} for bucket in ranks[0]["rank_dependent"]["buckets"]] == [{"b"}, {"a"}]
    arrival = [gradient_order(r["rank_dependent"]["events"][0]) for r in ranks]
    assert arrival[0][0].startswith("b") and arrival[1][0].startswith("a"), "arrival order should differ per rank"
    for step in range(3):
        orders = [launch_order(r["rank_dependent"]["events"][step]) for r in ranks]
        assert orders[0] == orders[1] == sorted(orders[0])


def test_bucketed_matches_reference_when_readiness_order_differs_between_ranks(observed):
    ranks = observed(2)
    expected = reference(RankOrderedBranches, world_size=2, steps=3)
    for r in ranks:
        assert_matches(r["rank_dependent"]["final"], expected)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_rebuild_repacks_in_readiness_order_and_so_restores_overlap(observed, world_size):
    rebuild = observed(world_size)[0]["rebuild"]
    assert rebuild["members_before"][0][0].startswith("early"), "packing should start with the last registered"
    assert rebuild["members_after"][0][0].startswith("late"), "after the rebuild the first-ready layer goes first"
    assert gradients_after_first_launch(rebuild["events"][0]) == 1, "before the rebuild bucket 0 completes last"
    assert gradients_after_first_launch(rebuild["events"][2]) > 1, "after the rebuild bucket 0 starts in backward"


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_bucketed_with_rebuild_matches_reference_with_execution_order_unlike_registration(observed, world_size):
    for r in observed(world_size):
        assert_matches(r["rebuild"]["final"], reference(OutOfOrder, world_size=world_size, steps=3))


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_bucketed_matches_reference_when_zero_grad_keeps_gradients_allocated(observed, world_size):
    for r in observed(world_size):
        assert_matches(r["kept_gradients"], reference(Chain, world_size=world_size, steps=STEPS))


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_a_gradient_accumulated_only_inside_no_sync_is_still_reduced(observed, world_size):
    expected = reference_with_gradient_only_inside_no_sync(world_size, STEPS)
    for r in observed(world_size):
        assert_matches(r["no_sync_only"], expected)
    # And the check can fail: training without the no_sync-only gradient ends elsewhere.
    untouched = build_model(TinyClassification(model=SometimesExtra), seed=SEED, device=CPU).extra.weight
    assert not torch.allclose(observed(world_size)[0]["no_sync_only"]["extra.weight"], untouched)


def test_a_second_backward_without_sync_is_refused_with_advice(observed):
    message = observed(1)[0]["second_backward"]
    assert "second gradient before sync_gradients()" in message
    assert "no_sync()" in message


@pytest.mark.parametrize(
    ("options", "named"),
    [({"bucket_cap_mb": 0}, "bucket_cap_mb: 0 is not"), ({"bucket_cap_mb": -1.5}, "bucket_cap_mb: -1.5 is not"),
     ({"first_bucket_mb": 0.0}, "first_bucket_mb: 0.0 is not a finite number (MiB > 0, or unset)")],
)  # fmt: skip
def test_options_of_zero_or_less_are_refused_naming_the_value(options, named):
    with pytest.raises(ConfigError, match=re.escape(named)) as caught:
        impls.create("bucketed", **options)
    assert "\n" not in str(caught.value)


def test_post_accumulate_hook_of_a_tied_weight_fires_once_per_backward():
    """What bucketed relies on: a shared parameter's gradient is complete when its hook fires."""
    first, second = nn.Linear(4, 4), nn.Linear(4, 4)
    second.weight = first.weight
    seen: list[torch.Tensor] = []
    first.weight.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    second(torch.tanh(first(torch.randn(3, 4)))).sum().backward()
    assert len(seen) == 1
    assert torch.equal(seen[0], first.weight.grad)


# ---- when buffers are broadcast: DDP's rule ------------------------------------------------------


class WithMarker(nn.Module):
    """One layer and a buffer that forward leaves alone: rank 1 changes it, a broadcast puts rank 0's back."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(FEATURES, CLASSES)
        self.register_buffer("marker", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


FORWARDS = ["no_grad", "train", "no_sync", "train", "train", "no_grad", "no_grad", "train", "no_sync", "no_sync",
            "train"]  # fmt: skip
"""Forwards in a row: under torch.no_grad(), a synchronised training step, a micro-batch inside no_sync()."""
BROADCAST_BEFORE = [True, False, True, False, True, True, False, False, True, False, False]
"""DDP broadcasts before the first forward and before any forward that follows one with gradients
enabled outside no_sync (its require_forward_param_sync, set at the end of each forward)."""


def observe_buffer_broadcasts(impl: str) -> list[bool]:
    """Per forward: whether rank 1's changed buffer came back as rank 0's (a broadcast ran before it)."""
    workload = TinyClassification(model=WithMarker)
    strategy = impls.create(impl)
    model = strategy.wrap(build_model(workload, seed=SEED + dist.get_rank(), device=CPU))
    marker = (model.module if impl == "stock" else model).marker
    broadcast = []
    for step, kind in enumerate(FORWARDS):
        if dist.get_rank() == 1:
            marker.fill_(99.0)
        batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=dist.get_rank(), step=step, device=CPU)
        if kind == "no_grad":
            with torch.no_grad():
                workload.loss(model, batch)
        elif kind == "no_sync":
            with strategy.no_sync():
                workload.loss(model, batch).backward()
        else:
            workload.loss(model, batch).backward()
            strategy.sync_gradients()
            model.zero_grad(set_to_none=True)
        broadcast.append(marker.item() == 0.0)
        marker.zero_()
    return broadcast


def observe_buffer_broadcasts_of_both() -> dict[str, list[bool]]:
    return {impl: observe_buffer_broadcasts(impl) for impl in ("stock", "bucketed")}


def test_buffers_are_broadcast_before_exactly_the_forwards_ddp_broadcasts_before():
    """Not under no_grad, not inside gradient accumulation: the same forwards as DDP, no more."""
    _, rank1 = run_in_process_group(observe_buffer_broadcasts_of_both, world_size=2)
    assert rank1["stock"] == BROADCAST_BEFORE  # what DDP does, read off DDP itself
    assert rank1["bucketed"] == BROADCAST_BEFORE
