"""The contract every strategy keeps: after a few SGD steps at world sizes 1, 2 and 3, its parameters
equal those of one process that accumulates every rank's batch, on models built to break
careless implementations; and every rank ends with the same parameters although each started
from different random weights.

One gloo group per world size trains the whole matrix (strategies × scenarios); the tests
only read the cached results, so a failure names its strategy and scenario.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any

import pytest
import torch
import torch.distributed as dist
from dist_helpers import CLASSES, FEATURES, TinyClassification, run_in_process_group, stop_ranks
from torch import nn

import impls
import workloads
from harness.measure.timing import StepTimer
from harness.measure.training import LEARNING_RATE, OPTIMIZER, build_model, make_batch, train_step
from harness.parity import reference as parity
from harness.protocols import ConfigError, Strategy, strategy_contract_gaps
from impls.dataparallel import batch_note

WORLD_SIZES = (1, 2, 3)
SEED = 1234
BATCH = 4
STEPS = 3
TINY_BUCKET_MB = 0.004
"""About 4 KiB: several buckets even on these small models, and the `oversized` layer's weight (8 KiB) exceeds it."""
CPU = torch.device("cpu")


class TiedWeights(nn.Module):
    """Two layers share one weight (as a language model's embedding and head do): one Parameter, two uses."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(FEATURES, 32)
        self.first = nn.Linear(32, 32)
        self.second = nn.Linear(32, 32)
        self.second.weight = self.first.weight
        self.head = nn.Linear(32, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.second(torch.tanh(self.first(torch.tanh(self.embed(x)))))))


class PartlyTrained(nn.Module):
    """One layer never used in forward (no gradient) and one frozen layer (requires_grad=False)."""

    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(FEATURES, 16)
        self.unused = nn.Linear(FEATURES, 16)
        self.frozen = nn.Linear(16, CLASSES).requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.frozen(torch.relu(self.used(x)))


class OutOfOrder(nn.Module):
    """Registered late, middle, early but run early, middle, late: packing order ≠ readiness order."""

    def __init__(self) -> None:
        super().__init__()
        self.late = nn.Linear(16, CLASSES)
        self.middle = nn.Linear(16, 16)
        self.early = nn.Linear(FEATURES, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.late(torch.relu(self.middle(torch.relu(self.early(x)))))


class Oversized(nn.Module):
    """One weight (8 KiB) bigger than the tiny bucket cap, between small ones."""

    def __init__(self) -> None:
        super().__init__()
        self.small = nn.Linear(FEATURES, FEATURES)
        self.huge = nn.Linear(FEATURES, 256)
        self.head = nn.Linear(256, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.huge(torch.relu(self.small(x)))))


class MixedDtypes(nn.Module):
    """A float64 layer feeding a float32 layer: gradients of two dtypes, never in one buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.Linear(FEATURES, 16).double()
        self.narrow = nn.Linear(16, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.narrow(torch.relu(self.wide(x.double())).float())


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scenario:
    """A model and how to train it; `bucket_cap_mb` goes to every strategy that has that option."""

    workload: str | type[nn.Module]
    bucket_cap_mb: float | None = None
    micro_batches: int = 1
    has_unused_parameters: bool = False

    def make_workload(self):
        if isinstance(self.workload, str):
            return workloads.create(self.workload, size="tiny")
        return TinyClassification(model=self.workload)


SCENARIOS = {
    "mlp": Scenario(workload="mlp"),
    "tied_weights": Scenario(workload=TiedWeights, bucket_cap_mb=TINY_BUCKET_MB),
    "unused_and_frozen_parameters": Scenario(
        workload=PartlyTrained, bucket_cap_mb=TINY_BUCKET_MB, has_unused_parameters=True
    ),
    "execution_order_unlike_registration_order": Scenario(workload=OutOfOrder, bucket_cap_mb=TINY_BUCKET_MB),
    "parameter_bigger_than_bucket_cap": Scenario(workload=Oversized, bucket_cap_mb=TINY_BUCKET_MB),
    "mixed_dtypes": Scenario(workload=MixedDtypes, bucket_cap_mb=TINY_BUCKET_MB),
    "gradient_accumulation_with_no_sync": Scenario(workload="mlp", micro_batches=2),
}


REFUSED = {
    # torch's ZeroRedundancyOptimizer needs every parameter in one dtype; `zero` says so instead of training.
    ("zero", "mixed_dtypes"): "ZeroRedundancyOptimizer needs every parameter in one dtype",
}
"""(strategy, scenario) pairs a strategy cannot train, with the clear error it must raise instead."""


def options_for(strategy: str, scenario: Scenario) -> dict[str, Any]:
    """The options a scenario needs, for the strategies that have them."""
    valid = impls.entry(strategy).options()
    options: dict[str, Any] = {}
    if scenario.bucket_cap_mb is not None and "bucket_cap_mb" in valid:
        options["bucket_cap_mb"] = scenario.bucket_cap_mb
    if scenario.has_unused_parameters and "find_unused_parameters" in valid:
        options["find_unused_parameters"] = True  # DDP refuses unused parameters without it
    return options


def strategies_to_run(world_size: int) -> list[str]:
    return [name for name in impls.names() if unavailable(name, world_size) is None]


def unavailable(strategy: str, world_size: int) -> str | None:
    created = impls.create(strategy)
    if created.extra_ranks:
        # Its step is a distributed-autograd step against a server rank, and its semantics differ
        # (the remote part is updated once per trainer): tests/plugins/test_rpc_hybrid.py checks it against
        # its own reference, through the real launcher.
        return "needs a parameter-server rank and a workload with a remote part; see tests/plugins/test_rpc_hybrid.py"
    return created.unavailable_reason(device="cpu", world_size=world_size)


# ---- inside every rank ----------------------------------------------------------------------


def train_matrix(world_size: int) -> dict[tuple[str, str], dict[str, torch.Tensor] | str]:
    """This rank's final parameters per (strategy, scenario), or the error text of a case that raised."""
    finals: dict[tuple[str, str], dict[str, torch.Tensor] | str] = {}
    for strategy in strategies_to_run(world_size):
        for name, scenario in SCENARIOS.items():
            try:
                finals[strategy, name] = train_case(strategy, scenario)
            except Exception as exc:
                finals[strategy, name] = f"{type(exc).__name__}: {exc}"
                dist.barrier()  # best effort: let the next case start together
    return finals


def train_case(strategy_name: str, scenario: Scenario) -> dict[str, torch.Tensor]:
    rank = dist.get_rank()
    workload = scenario.make_workload()
    strategy = impls.create(strategy_name, **options_for(strategy_name, scenario))
    # Each rank starts from its own weights: wrap must make rank 0's win.
    model = strategy.wrap(build_model(workload, seed=SEED + rank, device=CPU))
    optimizer = strategy.make_optimizer(model.parameters(), OPTIMIZER, lr=LEARNING_RATE)
    for step in range(STEPS):
        if scenario.micro_batches == 1:
            batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=rank, step=step, device=CPU)
            parts = {"model": model, "workload": workload, "strategy": strategy, "optimizer": optimizer}
            train_step(batch=batch, timer=StepTimer(), **parts)
        else:
            accumulate_and_step(model, workload, strategy, optimizer, step=step, micro_batches=scenario.micro_batches)
    return parity.state_on_cpu(strategy.full_state_dict(model))


def accumulate_and_step(model, workload, strategy, optimizer, *, step: int, micro_batches: int) -> None:
    """Backward on every micro-batch, communicating only on the last (inside no_sync before it)."""
    for micro in range(micro_batches):
        batch = micro_batch(workload, rank=dist.get_rank(), step=step, micro=micro, micro_batches=micro_batches)
        last = micro == micro_batches - 1
        with contextlib.nullcontext() if last else strategy.no_sync():
            workload.loss(model, batch).backward()
    strategy.sync_gradients()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def micro_batch(workload, *, rank: int, step: int, micro: int, micro_batches: int):
    return make_batch(workload, batch_size=BATCH, seed=SEED, rank=rank, step=step * micro_batches + micro, device=CPU)


# ---- in the test process ----------------------------------------------------------------------


def reference(scenario: Scenario, world_size: int, *, optimizer_cls=OPTIMIZER) -> dict[str, torch.Tensor]:
    """One process: every rank's (micro-)batches accumulated, divided by the world size, one optimizer step."""
    workload = scenario.make_workload()
    if scenario.micro_batches == 1 and optimizer_cls is OPTIMIZER:
        return parity.reference_parameters(
            workload, world_size=world_size, batch_size=BATCH, steps=STEPS, seed=SEED, device=CPU
        )
    model = build_model(workload, seed=SEED, device=CPU)
    optimizer = optimizer_cls(model.parameters(), lr=LEARNING_RATE)
    for step in range(STEPS):
        for rank in range(world_size):
            for micro in range(scenario.micro_batches):
                batch = micro_batch(workload, rank=rank, step=step, micro=micro, micro_batches=scenario.micro_batches)
                workload.loss(model, batch).backward()
        for p in model.parameters():
            if p.grad is not None:
                p.grad.div_(world_size)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return parity.parameters_on_cpu(model)


@pytest.fixture(scope="module")
def trained():
    """Per world size, lazily: every rank's results of the whole matrix (one gloo group each)."""

    @functools.cache
    def by_world_size(world_size: int) -> list[dict]:
        return run_in_process_group(train_matrix, world_size=world_size, args=(world_size,), timeout_s=240)

    yield by_world_size
    stop_ranks(3)  # no other module uses three ranks; world size 2 stays for the next module


@functools.cache
def cached_reference(scenario_name: str, world_size: int) -> dict[str, torch.Tensor]:
    return reference(SCENARIOS[scenario_name], world_size)


def final_parameters(trained, strategy: str, scenario: str, world_size: int) -> list[dict[str, torch.Tensor]]:
    reason = unavailable(strategy, world_size)
    if reason:
        pytest.skip(f"{strategy}: {reason}")
    per_rank = [rank_results[strategy, scenario] for rank_results in trained(world_size)]
    skip_if_refused(strategy, scenario, per_rank)
    for rank, final in enumerate(per_rank):
        assert not isinstance(final, str), f"{strategy} on {scenario} failed on rank {rank}: {final}"
    return per_rank


def skip_if_refused(strategy: str, scenario: str, per_rank: list) -> None:
    """A refused case passes only if every rank raised the expected error; it is then reported as skipped."""
    refusal = REFUSED.get((strategy, scenario))
    if refusal:
        assert all(isinstance(final, str) and refusal in final for final in per_rank), per_rank[0]
        pytest.skip(f"{strategy} refuses {scenario}: {refusal}")


def is_exact(strategy: str) -> bool:
    return impls.create(strategy).parity_exact


CASES = [
    pytest.param(strategy, scenario, world_size, id=f"{strategy}-{scenario}-world{world_size}")
    for world_size in WORLD_SIZES
    for strategy in impls.names()
    for scenario in SCENARIOS
]


@pytest.mark.parametrize(("strategy", "scenario", "world_size"), CASES)
def test_strategy_matches_single_process_reference(trained, strategy, scenario, world_size):
    if not is_exact(strategy) and world_size > 1:
        pytest.skip(f"{strategy} is not expected to match (see the test that it differs)")
    finals = final_parameters(trained, strategy, scenario, world_size)
    outcome = parity.compare(finals[0], cached_reference(scenario, world_size))
    assert outcome.within_tolerance, (
        f"{strategy} differs from the reference by {outcome.max_abs_diff:.3g} in {outcome.worst_parameter}"
    )


@pytest.mark.parametrize(("strategy", "scenario", "world_size"), [c for c in CASES if c.values[2] > 1])
def test_every_rank_ends_with_rank_zeros_parameters_although_each_started_from_its_own(
    trained, strategy, scenario, world_size
):
    if not is_exact(strategy):
        pytest.skip(f"{strategy} does not synchronise")
    finals = final_parameters(trained, strategy, scenario, world_size)
    for rank in range(1, world_size):
        outcome = parity.compare(finals[rank], finals[0])
        assert outcome.within_tolerance, f"rank {rank} differs from rank 0 in {outcome.worst_parameter}"


@pytest.mark.parametrize("world_size", [w for w in WORLD_SIZES if w > 1])
def test_local_differs_from_reference_so_the_parity_check_can_fail(trained, world_size):
    finals = final_parameters(trained, "local", "mlp", world_size)
    outcome = parity.compare(finals[0], cached_reference("mlp", world_size))
    assert not outcome.within_tolerance, "local trained on rank 0's batch alone yet matched the full-batch reference"
    assert not parity.compare(finals[1], finals[0]).within_tolerance, "local ranks ended equal without communicating"


def test_ranks_really_start_from_different_weights():
    """Otherwise the test that every rank ends equal would prove nothing about the broadcast in wrap."""
    workload = SCENARIOS["mlp"].make_workload()
    rank0 = parity.parameters_on_cpu(build_model(workload, seed=SEED, device=CPU))
    rank1 = parity.parameters_on_cpu(build_model(workload, seed=SEED + 1, device=CPU))
    assert not parity.compare(rank1, rank0).within_tolerance


def test_tied_weight_model_really_shares_one_parameter():
    model = TiedWeights()
    assert model.first.weight is model.second.weight
    assert len(list(model.parameters())) == len(list(model.named_parameters(remove_duplicate=False))) - 1


# ---- what holds without any process group ---------------------------------------------------------


@pytest.mark.parametrize("strategy", impls.names())
def test_strategy_follows_the_protocol_and_documents_every_option(strategy):
    assert strategy_contract_gaps(impls.entry(strategy).cls) == []
    assert isinstance(impls.create(strategy), Strategy)
    undocumented = [name for name, option in impls.entry(strategy).options().items() if not option.doc]
    assert not undocumented, f"{strategy} options without a doc (harness.protocols.option): {undocumented}"
    # what a rank asks of every strategy it times (zero shares stock's DDP options but has no comm_hook: asking
    # raised an AttributeError on every zero row once the notes read the hook)
    strategy_at_defaults = impls.create(strategy)
    for said in (strategy_at_defaults.timeline_cost(), strategy_at_defaults.timeline_caveat("cpu")):
        assert said is None or isinstance(said, str), (strategy, said)


def test_dataparallel_is_skipped_on_a_cpu_machine_with_its_reason():
    reason = impls.create("dataparallel").unavailable_reason(device="cpu", world_size=2)
    assert reason == "needs CUDA GPUs: nn.DataParallel runs one process over several GPUs"


def test_dataparallel_needs_one_visible_gpu_per_rank(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    strategy = impls.create("dataparallel")
    assert strategy.unavailable_reason(device="cuda", world_size=2) is None
    assert strategy.unavailable_reason(device="cuda", world_size=4) == "needs 4 GPUs in one process, 2 visible"


def test_dataparallel_asks_the_harness_to_run_it_in_one_process():
    assert impls.create("dataparallel").single_process is True
    assert impls.create("stock").single_process is False


@pytest.mark.parametrize(("batch_size", "devices"), [(8, 4), (4, 4), (3, 1)])
def test_dataparallel_batch_that_splits_evenly_needs_no_note(batch_size, devices):
    assert batch_note(batch_size, devices) is None


def test_dataparallel_batch_that_splits_unevenly_gets_a_note_naming_the_fix():
    note = batch_note(10, 4)
    assert note == (
        "batch size 10 does not split evenly over 4 GPUs: chunks of up to 3 samples, so some GPUs wait; "
        "a multiple of 4 splits evenly"
    )


def test_dataparallel_refuses_a_batch_smaller_than_its_gpu_count():
    with pytest.raises(ConfigError, match="batch size 2 is smaller than the 4 GPUs"):
        batch_note(2, 4)
