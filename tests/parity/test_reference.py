"""Gradient parity: the tolerance follows the compute dtype, and a wrong reduction still fails in every dtype.

The wrong strategies are simulated in one process, exactly as the reference is computed (every
rank's batch in turn), with the mistake made where a strategy would make it: the gradients
summed instead of averaged, or one parameter (a bucket) left with rank 0's gradient alone.
"""

from __future__ import annotations

import types

import pytest
import torch

import workloads
from harness.measure.timing import StepTimer
from harness.measure.training import (
    OPTIMIZERS,
    build_model,
    forward_precision,
    grad_scaler,
    make_batch,
    scaled_step,
    train_step,
)
from harness.parity import reference

CPU = torch.device("cpu")
SETUP = {"world_size": 2, "batch_size": 4, "steps": 4, "seed": 3, "device": CPU}


def trained(workload, *, dtype: str, mistake: str | None) -> dict[str, torch.Tensor]:
    """Two ranks' data in one process, reduced right (mean) or wrong; fp16's loss scaled as a strategy's is."""
    model = build_model(workload, seed=SETUP["seed"], device=CPU)
    optimizer = OPTIMIZERS["sgd"][0](model.parameters(), lr=OPTIMIZERS["sgd"][1])
    scaler = grad_scaler(dtype, CPU)
    left_out = list(model.parameters())[-1]
    for step in range(SETUP["steps"]):
        for rank in range(SETUP["world_size"]):
            batch = make_batch(workload, batch_size=SETUP["batch_size"], seed=SETUP["seed"], rank=rank, step=step,
                               device=CPU)  # fmt: skip
            with forward_precision(dtype, CPU):
                loss = workload.loss(model, batch)
            (loss if scaler is None else scaler.scale(loss)).backward()
            if rank == 0 and mistake == "bucket left out":
                rank0_grad = left_out.grad.clone()
        for p in model.parameters():
            if p.grad is not None and mistake != "sum, not mean":
                p.grad.div_(SETUP["world_size"])
        if mistake == "bucket left out":
            left_out.grad.copy_(rank0_grad)  # never all-reduced: rank 0 keeps its own gradient
        scaled_step(optimizer, scaler)
        optimizer.zero_grad(set_to_none=True)
    return reference.parameters_on_cpu(model)


@pytest.fixture(scope="module")
def workload():
    return workloads.create("mlp", size="tiny")


class Overflowing:
    """A workload whose loss is infinite at one step (its `world_size` losses a step counted as the reference
    computes them): every gradient then holds an inf or a NaN, as an fp16 overflow leaves them."""

    def __init__(self, workload, *, at_step: int, world_size: int = 1) -> None:
        self.workload, self.at_step, self.world_size, self.calls = workload, at_step, world_size, 0

    def __getattr__(self, name):
        return getattr(self.workload, name)

    def loss(self, model, batch):
        loss = self.workload.loss(model, batch)
        self.calls += 1
        return loss * float("inf") if (self.calls - 1) // self.world_size == self.at_step else loss


def test_fp16s_scaler_skips_a_step_with_an_inf_in_the_strategys_step_and_the_reference_alike(workload):
    """A forced inf at step 1 of 3: the timed step says it skipped, its parameters stay as step 0 left them, and the
    one-process reference skips the same step (its parameters equal the strategy's, bit for bit); a step in fp32
    goes through no scaler and is never said to skip."""
    setup = {**SETUP, "world_size": 1, "steps": 3}
    model = build_model(workload, seed=setup["seed"], device=CPU)
    optimizer = OPTIMIZERS["sgd"][0](model.parameters(), lr=OPTIMIZERS["sgd"][1])
    scaler, overflowing = grad_scaler("fp16", CPU), Overflowing(workload, at_step=1)
    strategy = types.SimpleNamespace(sync_gradients=lambda: None, zero_grad_set_to_none=True)
    skipped, after = [], []
    for step in range(setup["steps"]):
        batch = make_batch(workload, batch_size=setup["batch_size"], seed=setup["seed"], rank=0, step=step, device=CPU)
        skipped.append(train_step(model=model, workload=overflowing, strategy=strategy, optimizer=optimizer,
                                  batch=batch, timer=StepTimer(), precision=forward_precision("fp16", CPU),
                                  scaler=scaler))  # fmt: skip
        after.append(reference.parameters_on_cpu(model))
    assert skipped == [False, True, False]
    assert scaler.get_scale() == 2.0**15  # halved once from torch's 2^16
    assert all(torch.equal(after[0][name], after[1][name]) for name in after[0])
    assert not all(torch.equal(after[1][name], after[2][name]) for name in after[0])
    expected, _ = reference.reference_run(Overflowing(workload, at_step=1), dtype="fp16", **setup)
    assert all(torch.equal(expected[name], after[2][name]) for name in expected)
    unskipped, _ = reference.reference_run(workload, dtype="fp16", **setup)
    assert not all(torch.equal(unskipped[name], expected[name]) for name in expected)
    fp32 = {"precision": None, "scaler": grad_scaler("fp32", CPU)}
    assert fp32["scaler"] is None and not train_step(
        model=model, workload=workload, strategy=strategy, optimizer=optimizer, batch=batch, timer=StepTimer(), **fp32
    )


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_a_right_reduction_passes_and_wrong_ones_fail_in_every_compute_dtype(workload, dtype):
    expected, initial = reference.reference_run(workload, dtype=dtype, **SETUP)
    judged = {}
    for mistake in (None, "sum, not mean", "bucket left out"):
        outcome = reference.compare(trained(workload, dtype=dtype, mistake=mistake), expected, initial=initial,
                                 compute_dtype=dtype)  # fmt: skip
        judged[mistake] = outcome.within_tolerance
    print(dtype, judged)
    assert judged == {None: True, "sum, not mean": False, "bucket left out": False}


def test_an_autocast_run_is_allowed_a_share_of_each_parameters_movement_and_fp32_is_not(workload):
    expected, initial = reference.reference_run(workload, dtype="fp32", **SETUP)
    share = reference.COMPUTE_RTOL["bf16"]
    nudged = {n: t + 0.5 * share * (t - initial[n]).abs().max() for n, t in expected.items()}
    assert reference.compare(nudged, expected, initial=initial, compute_dtype="bf16").within_tolerance
    assert not reference.compare(nudged, expected, initial=initial, compute_dtype="fp32").within_tolerance


def test_an_autocast_run_cannot_be_judged_without_the_initial_parameters(workload):
    expected, _ = reference.reference_run(workload, dtype="bf16", **SETUP)
    with pytest.raises(ValueError, match="initial parameters"):
        reference.compare(expected, expected, compute_dtype="bf16")


def test_deterministic_algorithms_are_on_inside_the_block_and_restored_after():
    before = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    with reference.deterministic_algorithms():
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark) == before


def test_a_parity_note_names_the_largest_difference_only_where_there_is_one():
    """A difference of 0 everywhere once read 'largest difference in 0.weight', naming a parameter at random."""
    assert reference.ParityResult(0.0, True, "0.weight").where() == "identical to the reference in every parameter"
    assert reference.ParityResult(2e-7, True, "2.bias").where() == "largest difference in 2.bias"


def test_allowances_computed_once_judge_as_the_initial_parameters_do(workload):
    """The cached reference keeps each parameter's allowance, not the initial parameters: the same verdicts."""
    expected, initial = reference.reference_run(workload, dtype="fp32", **SETUP)
    allowance = reference.allowances(expected, initial, compute_dtype="bf16")
    assert reference.allowances(expected, initial, compute_dtype="fp32") is None
    for scale in (0.5, 2.0):  # half the allowance passes, twice fails
        nudged = {n: t + scale * allowance[n] for n, t in expected.items()}
        by_initial = reference.compare(nudged, expected, initial=initial, compute_dtype="bf16")
        assert reference.compare(nudged, expected, allowance=allowance, compute_dtype="bf16") == by_initial
        assert by_initial.within_tolerance == (scale < 1)


def test_a_nan_fails_and_a_difference_within_rtol_alone_passes():
    """The element-wise bound is skipped only where the largest difference is within atol alone."""
    atol, _ = reference.TOLERANCE[torch.float32]
    ref = {"w": torch.tensor([1000.0, 1.0])}
    within_rtol = {"w": torch.tensor([1000.0 + 50 * atol, 1.0])}  # 5e-4 > atol, < rtol·1000 = 0.1
    outcome = reference.compare(within_rtol, ref)
    assert outcome.within_tolerance and outcome.max_abs_diff > atol
    failing = reference.compare({"w": torch.tensor([1000.0, 1.0 + 50 * atol])}, ref)
    assert not failing.within_tolerance
    # the tolerance the verdict names is the bound where the difference is largest: atol + rtol·|1.0|, not |1000|'s
    assert outcome.allowed == pytest.approx(atol + 1e-4 * 1000.0) and failing.allowed == pytest.approx(atol + 1e-4)
    assert not reference.compare({"w": torch.tensor([1000.0, float("nan")])}, ref).within_tolerance


def adamw_trained(workload, *, mistake: str | None) -> dict[str, torch.Tensor]:
    """`trained`'s two ranks under AdamW, right or with a mistake that changes the training itself."""
    model = build_model(workload, seed=SETUP["seed"], device=CPU)
    optimizer_cls, learning_rate = OPTIMIZERS["adamw"]
    *stepped, last = model.parameters()
    optimizer = optimizer_cls(stepped if mistake == "a parameter left unstepped" else [*stepped, last],
                              lr=learning_rate * (2 if mistake == "twice the rate" else 1))  # fmt: skip
    for step in range(SETUP["steps"]):
        for rank in range(SETUP["world_size"]):
            batch = make_batch(workload, batch_size=SETUP["batch_size"], seed=SETUP["seed"], rank=rank, step=step,
                               device=CPU)  # fmt: skip
            workload.loss(model, batch).backward()
            if rank == 0 and mistake == "bucket left out":
                rank0_grad = last.grad.clone()
        for p in model.parameters():
            p.grad.div_(SETUP["world_size"])
        if mistake == "bucket left out":
            last.grad.copy_(rank0_grad)  # never all-reduced: rank 0 keeps its own gradient
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return reference.parameters_on_cpu(model)


def test_under_adamw_a_right_reduction_passes_and_wrong_training_still_fails(workload):
    """The sign-like allowance covers only elements whose gradient was within rounding of zero: a bucket never
    all-reduced, twice the learning rate or a parameter the optimizer never steps still fails. (A sum for a mean
    is no test under Adam: its update m̂/(√v̂ + eps) is the same for any scale of the gradient but through eps.)"""
    sign_like = []
    expected, _ = reference.reference_run(workload, optimizer="adamw", sign_like=sign_like, **SETUP)
    judged = {
        mistake: reference.compare(adamw_trained(workload, mistake=mistake), expected, sign_like=sign_like[0])
        for mistake in (None, "bucket left out", "twice the rate", "a parameter left unstepped")
    }
    assert {mistake: outcome.within_tolerance for mistake, outcome in judged.items()} == {
        None: True, "bucket left out": False, "twice the rate": False, "a parameter left unstepped": False
    }  # fmt: skip
    assert sign_like[0].step_allowance == 2 * OPTIMIZERS["adamw"][1]
    assert all(t.dtype == torch.uint8 and t.max() <= SETUP["steps"] for t in sign_like[0].steps.values())
    plain = []
    reference.reference_run(workload, optimizer="sgd", sign_like=plain, **SETUP)
    assert plain == [None]  # SGD's update is linear in the gradient: its rounding stays rounding


def test_adamw_turns_a_gradient_summed_in_another_order_into_a_share_of_lr_allowed_only_there():
    """Three ranks' gradients 1, -1 and 3e-8 for one element: summed in that order 3e-8, summed 1, 3e-8, -1 exactly 0
    (3e-8 is under half of 1's rounding step). AdamW moves the element by lr/2 the one way and not at all the other:
    a difference 50 times fp32's atol that is rounding alone, which the verdict allows there (2·lr a step where the
    gradient was within 10 eps of zero, not 0) and nowhere else. FSDP at one rank on hf:t5/small failed parity so."""
    ranks = torch.tensor([[1.0, 0.5], [-1.0, 0.25], [3e-8, 0.125]])  # (rank, element): element 1 sums exactly
    final = {}
    for order in ([0, 1, 2], [0, 2, 1]):
        model = torch.nn.Linear(2, 1, bias=False)
        torch.nn.init.zeros_(model.weight)
        optimizer = OPTIMIZERS["adamw"][0](model.parameters(), lr=OPTIMIZERS["adamw"][1])
        counter = reference.NearZeroSteps(model, optimizer)
        model.weight.grad = torch.zeros(1, 2)
        for rank in order:
            model.weight.grad += ranks[rank]
        model.weight.grad /= 3
        counter.count(model, 1.0)
        optimizer.step()
        final[tuple(order)] = ({"weight": model.weight.detach().clone()}, counter.result())
    (expected, sign_like), (actual, _) = final[(0, 1, 2)], final[(0, 2, 1)]
    assert sign_like.steps["weight"].tolist() == [[1, 0]]
    assert (actual["weight"] - expected["weight"]).abs().tolist()[0] == pytest.approx([5e-4, 0.0], rel=1e-3)
    atol, _ = reference.TOLERANCE[torch.float32]
    assert not reference.compare(actual, expected).within_tolerance
    outcome = reference.compare(actual, expected, sign_like=sign_like)
    assert outcome.within_tolerance and outcome.allowed == pytest.approx(atol + 1e-4 * 5e-4 + 2e-3)
    elsewhere = {"weight": actual["weight"] + torch.tensor([[0.0, 5e-4]])}  # the same difference where it is not
    assert not reference.compare(elsewhere, expected, sign_like=sign_like).within_tolerance


def test_a_gradient_near_zero_after_a_large_one_is_no_sign_like_step():
    """Once an element's gradient was beyond rounding, Adam's second moment keeps it: a later gradient near zero then
    moves the update by its rounding alone (AdamW on 1.0, 0.5, then ±3e-8 differs by 0.0), so it earns no 2·lr."""
    model = torch.nn.Linear(2, 1, bias=False)
    optimizer = OPTIMIZERS["adamw"][0](model.parameters(), lr=OPTIMIZERS["adamw"][1])
    counter = reference.NearZeroSteps(model, optimizer)
    for grad in ([1.0, 3e-8], [3e-8, 3e-8], [0.0, -3e-8]):
        model.weight.grad = torch.tensor([grad])
        counter.count(model, 1.0)
    assert counter.result().steps["weight"].tolist() == [[0, 3]]
