"""The sharded strategies (`zero`, `fsdp`) beyond the SGD contract: parity with the single-process
reference under Adam (stateful, elementwise: a shard that is stepped wrongly shows at once), the
optimizer state that ZeRO really shards, and the CPU limits they declare.

One gloo group per world size trains the whole matrix; the tests read the cached results.
"""

from __future__ import annotations

import contextlib
import functools
import types

import pytest
import torch
import torch.distributed as dist
from dist_helpers import run_in_process_group, stop_ranks
from test_impls_contract import (
    BATCH,
    SCENARIOS,
    SEED,
    STEPS,
    Scenario,
    micro_batch,
    options_for,
    reference,
    skip_if_refused,
)
from torch import nn

import impls
from harness.blocks import model_blocks
from harness.config.bench import DEFAULT_WARMUP
from harness.measure.held import held_bytes, optimizer_state_bytes
from harness.measure.timing import StepTimer
from harness.measure.training import LEARNING_RATE, build_model, forward_precision, grad_scaler, make_batch, train_step
from harness.parity import reference as parity
from harness.protocols import ConfigError

CPU = torch.device("cpu")
SHARDED = ("zero", "fsdp")
WORLD_SIZES = (2, 3)
ADAM = torch.optim.Adam
MEMORY_WORKLOAD = "mlp"
"""Adam's state on the contract mlp, measured after one step for `stock` and for `zero`."""


# ---- inside every rank ----------------------------------------------------------------------


def train_matrix() -> dict:
    """Per (strategy, scenario): this rank's final parameters or the error text; and held bytes after one step."""
    finals: dict = {}
    for strategy in SHARDED:
        for name, scenario in SCENARIOS.items():
            try:
                finals[strategy, name] = train_case(strategy, scenario)
            except Exception as exc:
                finals[strategy, name] = f"{type(exc).__name__}: {exc}"
                dist.barrier()  # best effort: let the next case start together
    held = {strategy: held_after_one_step(strategy) for strategy in ("stock", *SHARDED)}
    return {"finals": finals, "held": held}


def train_case(strategy_name: str, scenario: Scenario) -> dict[str, torch.Tensor]:
    workload = scenario.make_workload()
    strategy = impls.create(strategy_name, **options_for(strategy_name, scenario))
    model = strategy.wrap(build_model(workload, seed=SEED + dist.get_rank(), device=CPU))
    optimizer = strategy.make_optimizer(model.parameters(), ADAM, lr=LEARNING_RATE)
    for step in range(STEPS):
        for micro in range(scenario.micro_batches):
            batch = micro_batch(
                workload, rank=dist.get_rank(), step=step, micro=micro, micro_batches=scenario.micro_batches
            )
            with strategy.no_sync() if micro < scenario.micro_batches - 1 else contextlib.nullcontext():
                workload.loss(model, batch).backward()
        strategy.sync_gradients()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return parity.state_on_cpu(strategy.full_state_dict(model))


def held_after_one_step(strategy_name: str) -> dict[str, int]:
    workload = SCENARIOS[MEMORY_WORKLOAD].make_workload()
    strategy = impls.create(strategy_name)
    model = strategy.wrap(build_model(workload, seed=SEED, device=CPU))
    optimizer = strategy.make_optimizer(model.parameters(), ADAM, lr=LEARNING_RATE)
    batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=dist.get_rank(), step=0, device=CPU)
    train_step(model=model, workload=workload, strategy=strategy, optimizer=optimizer, batch=batch, timer=StepTimer())
    return held_bytes(model, optimizer)


def fp16_overflow_in_one_shard() -> tuple[list[bool], float]:
    """fsdp in fp16, two steps: after the first's reduce-scatter an inf lands in rank 0's gradient shard alone (one
    shard of a parameter overflowing). Which steps this rank's grad scaler skipped, and its scale after."""
    workload = SCENARIOS[MEMORY_WORKLOAD].make_workload()
    strategy = impls.create("fsdp")
    model = strategy.wrap(build_model(workload, seed=SEED + dist.get_rank(), device=CPU))
    optimizer = strategy.make_optimizer(model.parameters(), torch.optim.SGD, lr=LEARNING_RATE)
    scaler, skipped = grad_scaler("fp16", CPU), []
    for step in range(2):

        def sync(step=step):
            strategy.sync_gradients()
            if step == 0 and dist.get_rank() == 0:
                shard = next(p.grad.to_local() for p in model.parameters() if p.grad.to_local().numel())
                shard.view(-1)[0] = float("inf")

        batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=dist.get_rank(), step=step, device=CPU)
        stepped = types.SimpleNamespace(sync_gradients=sync, zero_grad_set_to_none=strategy.zero_grad_set_to_none)
        fp16 = {"precision": forward_precision("fp16", CPU), "scaler": scaler}
        skipped.append(train_step(model=model, workload=workload, strategy=stepped, optimizer=optimizer, batch=batch,
                                  timer=StepTimer(), **fp16))  # fmt: skip
    return skipped, scaler.get_scale()


def test_fsdp_in_fp16_skips_on_every_rank_where_one_ranks_shard_overflows():
    """FSDP2's gradients are DTensor shards: torch's grad scaler all-reduces their inf check (torch >= 2.5), so the
    rank whose shard holds no inf skips the step too, and the ranks' scales stay one."""
    assert (
        run_in_process_group(fp16_overflow_in_one_shard, world_size=2, timeout_s=120) == [([True, False], 2.0**15)] * 2
    )


# ---- in the test process ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained():
    @functools.cache
    def by_world_size(world_size: int) -> list[dict]:
        return run_in_process_group(train_matrix, world_size=world_size, timeout_s=180)

    yield by_world_size
    stop_ranks(3)


@functools.cache
def adam_reference(scenario_name: str, world_size: int) -> dict[str, torch.Tensor]:
    """The contract's one-process reference, stepped with Adam."""
    return reference(SCENARIOS[scenario_name], world_size, optimizer_cls=ADAM)


def finals_of(trained, strategy: str, scenario: str, world_size: int) -> list[dict[str, torch.Tensor]]:
    per_rank = [results["finals"][strategy, scenario] for results in trained(world_size)]
    skip_if_refused(strategy, scenario, per_rank)
    for rank, final in enumerate(per_rank):
        assert not isinstance(final, str), f"{strategy} on {scenario} failed on rank {rank}: {final}"
    return per_rank


@pytest.mark.parametrize("world_size", WORLD_SIZES)
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("strategy", SHARDED)
def test_sharded_strategy_matches_single_process_reference_with_adam(trained, strategy, scenario, world_size):
    finals = finals_of(trained, strategy, scenario, world_size)
    expected = adam_reference(scenario, world_size)
    for rank, final in enumerate(finals):
        outcome = parity.compare(final, expected)
        assert outcome.within_tolerance, (
            f"{strategy} rank {rank} differs from the Adam reference by {outcome.max_abs_diff:.3g} "
            f"in {outcome.worst_parameter}"
        )


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_zero_holds_about_one_nth_of_stocks_optimizer_state(trained, world_size):
    held = [results["held"] for results in trained(world_size)]
    stock = [rank["stock"]["optimizer_state_bytes"] for rank in held]
    zero = [rank["zero"]["optimizer_state_bytes"] for rank in held]
    assert len(set(stock)) == 1 and stock[0] > 0, f"stock replicates the whole state on every rank: {stock}"
    assert sum(zero) == pytest.approx(stock[0], rel=0.02), "the shards together are the whole state (steps aside)"
    for rank, nbytes in enumerate(zero):
        # ZeRO assigns whole parameters to ranks, so a shard is 1/N only up to one parameter's state.
        assert nbytes / stock[0] == pytest.approx(1 / world_size, abs=0.25), f"rank {rank}: {zero} vs {stock[0]}"


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_fsdp_shards_parameters_gradients_and_optimizer_state(trained, world_size):
    held = [results["held"] for results in trained(world_size)]
    for kind in ("param_bytes", "optimizer_state_bytes"):
        stock = held[0]["stock"][kind]
        fsdp = [rank["fsdp"][kind] for rank in held]
        assert sum(fsdp) == pytest.approx(stock, rel=0.1), f"{kind}: FSDP's shards should add up to the whole"
        assert max(fsdp) < stock * (1 / world_size + 0.1), f"{kind}: {fsdp} vs replicated {stock}"


# ---- what holds without any process group ---------------------------------------------------------


def test_optimizer_state_bytes_counts_adams_two_moments_and_step():
    weight = torch.nn.Parameter(torch.ones(10))
    optimizer = ADAM([weight], lr=0.1)
    weight.grad = torch.ones(10)
    optimizer.step()
    step_bytes = optimizer.state[weight]["step"].numel() * optimizer.state[weight]["step"].element_size()
    assert optimizer_state_bytes(optimizer) == 2 * 10 * 4 + step_bytes


def test_fsdp_refuses_mixed_precision_on_the_cpu_with_its_reason():
    strategy = impls.create("fsdp", param_dtype="bf16")
    assert strategy.unavailable_reason(device="cpu", world_size=2) == (
        "FSDP mixed precision (param_dtype/reduce_dtype bf16) is offered on CUDA only"
    )
    assert strategy.unavailable_reason(device="cuda", world_size=2) is None
    with pytest.raises(ConfigError, match="need CUDA"):
        strategy.wrap(torch.nn.Linear(2, 2))


def test_fsdp_is_unavailable_with_its_reason_on_a_torch_without_public_fully_shard(monkeypatch):
    """torch 2.4 and 2.5 (pyproject allows 2.4) keep FSDP2 in torch.distributed._composable: `wrap`'s import of
    torch.distributed.fsdp.fully_shard would fail every fsdp configuration with an ImportError there."""
    import impls.fsdp

    monkeypatch.setattr(impls.fsdp, "torch_release", lambda: (2, 5))
    reason = impls.create("fsdp").unavailable_reason(device="cuda", world_size=2)
    assert reason is not None and "torch.distributed.fsdp.fully_shard" in reason and "2.6" in reason
    monkeypatch.setattr(impls.fsdp, "torch_release", lambda: (2, 6))
    assert impls.create("fsdp").unavailable_reason(device="cuda", world_size=2) is None


def test_zero_overlap_with_ddp_is_declared_unavailable_on_gloo():
    strategy = impls.create("zero", overlap_with_ddp=True)
    assert "NCCL" in strategy.unavailable_reason(device="cpu", world_size=2)
    assert strategy.unavailable_reason(device="cuda", world_size=2) is None
    assert not strategy.parity_exact


def test_zero_overlap_with_ddp_asks_the_process_groups_backend_where_there_is_one(single_rank):
    """Inside the ranks the group decides: --backend gloo on GPUs is refused too."""
    assert "NCCL" in impls.create("zero", overlap_with_ddp=True).unavailable_reason(device="cuda", world_size=1)


def test_zero_refuses_parameters_as_bucket_view_with_overlap_which_torch_would_ignore():
    with pytest.raises(ConfigError, match=r"^zero: parameters_as_bucket_view=true has no effect with overlap_with_ddp"):
        impls.create("zero", overlap_with_ddp=True, parameters_as_bucket_view=True)
    assert impls.create("zero", parameters_as_bucket_view=True).parameters_as_bucket_view  # alone: fine


def test_zero_overlap_says_static_graph_skips_three_updates_and_what_the_warmup_hides():
    """torch's ZeroRedundancyOptimizer: two steps without an update, three with static_graph."""
    doc = impls.entry("zero").options()["overlap_with_ddp"].doc
    assert "first two steps (three with static_graph)" in doc
    assert f"--warmup {DEFAULT_WARMUP}" in doc and DEFAULT_WARMUP >= 3  # and on CUDA (NCCL only) DDP's 11


class Stacked(nn.Module):
    """A transformer-like shape: an embedding, a ModuleList of repeated layers, a head tied to the embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)) for _ in range(3))
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight


def test_fsdp_blocks_are_the_repeated_layers_and_leave_tied_weights_to_the_root():
    model = Stacked()
    assert model_blocks(model) == list(model.layers)


def test_fsdp_blocks_of_a_plain_sequential_are_its_layers_with_parameters():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    assert model_blocks(model) == [model[0], model[2]]


def test_fsdp_blocks_skip_children_that_share_a_parameter():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2))
    model[1].weight = model[0].weight
    assert model_blocks(model) == [model[2]]
