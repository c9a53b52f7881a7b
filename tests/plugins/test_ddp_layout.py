"""`stock` is DDP's default and `bucketed` packs like it: the same buckets on every workload, so that a
comparison of the two compares reducers, not layouts; and DDP's gradient_as_bucket_view really keeps
the gradients in the buckets from step to step.

Each workload is trained for a few steps at world size 1 in this process (DDP rebuilds its buckets
in the order gradients became ready after its first step; `bucketed` does the same), then the two
layouts — every bucket's parameters, in launch order — are compared.
"""

from __future__ import annotations

import functools

import pytest
import torch

import impls
import workloads
from harness.comm_timeline import CommTimeline
from harness.measure.timing import StepTimer
from harness.measure.training import OPTIMIZER, build_model, make_batch, train_step

CPU = torch.device("cpu")
STEPS = 2  # DDP rebuilds its buckets after step 1; step 2 runs on the rebuilt ones


def trained(impl: str, workload_name: str, size: str, *, steps: int = STEPS, **options):
    workload = workloads.create(workload_name, size=size)
    strategy = impls.create(impl, **options)
    timeline = CommTimeline(CPU)
    assert strategy.attach_timeline(timeline)
    model = strategy.wrap(build_model(workload, seed=0, device=CPU))
    optimizer = strategy.make_optimizer(model.parameters(), OPTIMIZER, lr=1e-3)
    after_steps = []
    for step in range(steps):
        batch = make_batch(workload, batch_size=2, seed=0, rank=0, step=step, device=CPU)
        train_step(
            model=model, workload=workload, strategy=strategy, optimizer=optimizer, batch=batch,
            timer=StepTimer(), timeline=timeline, step=step,
        )  # fmt: skip
        after_steps.append({name: p.grad for name, p in model.named_parameters()})
    return strategy, model, timeline, after_steps


@functools.cache
def default_layout(impl: str, workload_name: str, size: str) -> dict:
    """The layout a strategy with its default options ends with: gpt2/small's stock one is read twice below (the
    same two steps, trained once; the dict is the tests' to read, not to change)."""
    return trained(impl, workload_name, size)[0].layout()


# Every workload at tiny (one or two buckets at DDP's default caps), and gpt2/small, whose rebuild makes a small
# first bucket; the many-bucket packing of every workload is checked at tiny under a small explicit cap below
# (every workload at small too cost the suite ~25 s for nothing a small cap misses).
DEFAULT_LAYOUTS = [*((name, "tiny") for name in workloads.names()), ("gpt2", "small")]


@pytest.mark.parametrize(("workload", "size"), DEFAULT_LAYOUTS)
def test_stock_and_bucketed_build_the_same_buckets_by_default(single_rank, workload, size):
    stock = default_layout("stock", workload, size)
    bucketed = default_layout("bucketed", workload, size)
    assert stock["bucket_cap_mb"] == bucketed["bucket_cap_mb"] == 25.0
    assert stock["first_bucket_cap_mb"] == bucketed["first_bucket_cap_mb"] == 1.0  # DDP's default first bucket
    assert bucketed["bucket_params"] == stock["bucket_params"]
    assert bucketed["bucket_sizes_mb"] == pytest.approx(stock["bucket_sizes_mb"])


@pytest.mark.parametrize("workload", workloads.names())
def test_an_explicit_cap_caps_the_first_bucket_too_in_both(single_rank, workload):
    """A cap of an eighth of what DDP buckets by default: several buckets on every workload, packed alike."""
    cap_mb = sum(default_layout("stock", workload, "tiny")["bucket_sizes_mb"]) / 8
    stock = trained("stock", workload, "tiny", bucket_cap_mb=cap_mb)[0].layout()
    bucketed = trained("bucketed", workload, "tiny", bucket_cap_mb=cap_mb)[0].layout()
    assert stock["first_bucket_cap_mb"] == pytest.approx(cap_mb, rel=1e-3)  # the layouts keep 6 decimals
    assert bucketed["first_bucket_cap_mb"] == pytest.approx(cap_mb, rel=1e-3)
    assert bucketed["bucket_params"] == stock["bucket_params"]
    assert bucketed["bucket_sizes_mb"] == pytest.approx(stock["bucket_sizes_mb"])
    assert len(stock["bucket_sizes_mb"]) > 1


def test_ddps_default_rebuilds_gpt2_small_into_a_small_first_bucket(single_rank):
    sizes = default_layout("stock", "gpt2", "small")["bucket_sizes_mb"]
    assert len(sizes) == 2 and sizes[0] == pytest.approx(1.0, abs=0.01)  # [1.00, 15.17] MiB


def storages(grads: dict[str, torch.Tensor]) -> set[int]:
    return {g.untyped_storage().data_ptr() for g in grads.values() if g is not None}


def test_gradient_as_bucket_view_keeps_the_gradients_in_the_buckets_between_steps(single_rank):
    strategy, model, _, after_steps = trained("stock", "mlp", "tiny", steps=4, gradient_as_bucket_view=True)
    buckets = len(strategy.layout()["bucket_sizes_mb"])
    # zeroed in place, not dropped: after step 3 every .grad is still there, zero, in one of the buckets
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    assert len(storages(after_steps[2])) == buckets
    assert storages(after_steps[2]) == storages(after_steps[3]), "the same bucket memory from step to step"
    _, _, _, dropped = trained("stock", "mlp", "tiny", steps=4)
    assert all(g is None for g in dropped[2].values())  # without it: dropped, so DDP copies fresh ones in again


@pytest.mark.parametrize("impl", ["stock", "bucketed", "naive", "flat"])
def test_every_collective_of_every_step_is_stamped_in_order(single_rank, impl):
    _, _, timeline, _ = trained(impl, "mlp", "tiny")
    rows = timeline.rows()
    assert {r["step"] for r in rows} == set(range(STEPS))
    for r in rows:
        assert 0 <= r["ready_ms"] <= r["launched_ms"] <= r["done_ms"], r
        assert r["bytes"] > 0 and r["collective"] == "all_reduce"


def test_flat_reports_its_one_buffer_as_a_bucket_the_size_of_every_gradient(single_rank):
    """What the memory model counts beside the gradients: flat's buffer holds every trainable gradient."""
    strategy, model, _, _ = trained("flat", "mlp", "tiny")
    grad_mb = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad) / 2**20
    assert strategy.layout()["bucket_sizes_mb"] == pytest.approx([grad_mb], abs=1e-6)
