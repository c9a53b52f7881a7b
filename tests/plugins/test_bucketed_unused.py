"""`bucketed` with a branch the loss sometimes leaves unused (a mixture-of-experts' idle expert, in small):
refused by default, as DDP refuses it; with find_unused_parameters a parameter no rank used keeps .grad None,
so Adam leaves it where it is, as with DDP's find_unused_parameters and as in the single-process reference."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.distributed as dist
from dist_helpers import SometimesExtra, TinyClassification, run_in_process_group

import impls
from harness.measure.training import OPTIMIZERS, build_model, make_batch
from harness.parity import reference as parity

SEED, BATCH, STEPS = 7, 4, 4
ADAM, ADAM_LR = OPTIMIZERS["adam"]  # has momentum: a zero gradient still moves a parameter, a None one does not
CPU = torch.device("cpu")


def uses_extra(rank: int, step: int) -> bool:
    """Used by every rank in step 0, by rank 0 alone in step 1, by none after: idle, then idle everywhere."""
    return step == 0 or (step == 1 and rank == 0)


def train_bucketed(**options) -> dict[str, torch.Tensor] | str:
    workload = TinyClassification(model=SometimesExtra)
    strategy = impls.create("bucketed", **options)
    model = strategy.wrap(build_model(workload, seed=SEED, device=CPU))
    optimizer = ADAM(model.parameters(), lr=ADAM_LR)
    rank = dist.get_rank()
    for step in range(STEPS):
        model.use_extra = uses_extra(rank, step)
        batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=rank, step=step, device=CPU)
        workload.loss(model, batch).backward()
        try:
            strategy.sync_gradients()
        except RuntimeError as exc:
            return str(exc)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return parity.parameters_on_cpu(model)


def observe() -> dict[str, object]:
    observations: dict[str, object] = {"allowed": train_bucketed(find_unused_parameters=True)}
    if dist.get_world_size() == 1:  # with more ranks, one refusing leaves the others in a collective
        observations["refused"] = train_bucketed()
    return observations


def reference(world_size: int, *, zero_fill: bool) -> dict[str, torch.Tensor]:
    """One process over every rank's batch; `zero_fill` gives a gradient no rank had zeros (the bug) instead of None."""
    workload = TinyClassification(model=SometimesExtra)
    model = build_model(workload, seed=SEED, device=CPU)
    optimizer = ADAM(model.parameters(), lr=ADAM_LR)
    for step in range(STEPS):
        for rank in range(world_size):
            model.use_extra = uses_extra(rank, step)
            batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=rank, step=step, device=CPU)
            workload.loss(model, batch).backward()
        for p in model.parameters():
            if p.grad is not None:
                p.grad.div_(world_size)
            elif zero_fill:
                p.grad = torch.zeros_like(p)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return parity.parameters_on_cpu(model)


@pytest.fixture(scope="module")
def observed():
    return functools.cache(lambda world_size: run_in_process_group(observe, world_size=world_size))


@pytest.mark.parametrize("world_size", [1, 2])
def test_a_parameter_no_rank_used_keeps_no_gradient_so_adam_leaves_it(observed, world_size):
    expected = reference(world_size, zero_fill=False)
    for r in observed(world_size):
        assert parity.compare(r["allowed"], expected).within_tolerance
    # The check can fail: zero gradients for the idle branch (what bucketed did) move it by Adam's momentum.
    zero_filled = reference(world_size, zero_fill=True)
    assert not torch.allclose(zero_filled["extra.weight"], expected["extra.weight"])


def test_without_find_unused_parameters_the_unused_branch_is_refused_in_one_line_naming_it(observed):
    refused = observed(1)[0]["refused"]
    assert isinstance(refused, str) and "\n" not in refused
    assert "extra.weight" in refused and "--opt find_unused_parameters=true" in refused


def timed_mask_steps() -> list[dict]:
    """Two steps with find_unused_parameters and a timeline attached: every collective's row."""
    from harness.comm_timeline import CommTimeline
    from harness.measure.timing import StepTimer
    from harness.measure.training import OPTIMIZER, train_step

    workload = TinyClassification(model=SometimesExtra)
    strategy, timeline, timer = impls.create("bucketed", find_unused_parameters=True), CommTimeline(CPU), StepTimer()
    assert strategy.attach_timeline(timeline)
    model = strategy.wrap(build_model(workload, seed=SEED, device=CPU))
    optimizer = strategy.make_optimizer(model.parameters(), OPTIMIZER, lr=1e-3)
    rank = dist.get_rank()
    for step in range(2):
        model.use_extra = uses_extra(rank, step)
        batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=rank, step=step, device=CPU)
        train_step(model=model, workload=workload, strategy=strategy, optimizer=optimizer, batch=batch,
                   timer=timer, timeline=timeline, step=step)  # fmt: skip
    return [{**row, "phases": phases} for row in timeline.rows() for s, phases in enumerate(timer.collect())
            if row["step"] == s]  # fmt: skip


def test_the_mask_of_used_parameters_is_a_timed_collective_after_the_buckets():
    """Its all-reduce is communication a step waits for: untimed, its wait read as the strategy's own work."""
    import types

    from harness.analysis import overlap
    from harness.comm_timeline import UNUSED
    from reports.figures.timeline import collective_name

    rows = run_in_process_group(timed_mask_steps, world_size=2)[0]
    for step in (0, 1):
        mine = [r for r in rows if r["step"] == step]
        masks = [r for r in mine if r["bucket"] == UNUSED]
        assert len(masks) == 1 and masks[0]["collective"] == "unused_mask" and masks[0]["blocking"], mine
        assert masks[0]["bytes"] == 4 * 4  # one int32 a parameter: main's and extra's weight and bias
        assert masks[0]["launched_ms"] >= max(r["launched_ms"] for r in mine if r["bucket"] >= 0)
        assert collective_name(types.SimpleNamespace(**masks[0])) == "unused mask"
        figures = overlap.step_communication(masks[0]["phases"], [{k: v for k, v in r.items() if k != "phases"}
                                                                  for r in mine])  # fmt: skip
        assert figures["comm_ms"] >= masks[0]["done_ms"] - masks[0]["launched_ms"] - 1e-6
