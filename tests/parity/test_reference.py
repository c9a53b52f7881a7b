"""Gradient parity: the tolerance follows the compute dtype, and a wrong reduction still fails in every dtype.

The wrong strategies are simulated in one process, exactly as the reference is computed (every
rank's batch in turn), with the mistake made where a strategy would make it: the gradients
summed instead of averaged, or one parameter (a bucket) left with rank 0's gradient alone.
"""

from __future__ import annotations

import pytest
import torch

import workloads
from harness.measure.training import OPTIMIZERS, build_model, forward_precision, make_batch
from harness.parity import reference

CPU = torch.device("cpu")
SETUP = {"world_size": 2, "batch_size": 4, "steps": 4, "seed": 3, "device": CPU}


def trained(workload, *, dtype: str, mistake: str | None) -> dict[str, torch.Tensor]:
    """Two ranks' data in one process, reduced right (mean) or wrong."""
    model = build_model(workload, seed=SETUP["seed"], device=CPU)
    optimizer = OPTIMIZERS["sgd"][0](model.parameters(), lr=OPTIMIZERS["sgd"][1])
    left_out = list(model.parameters())[-1]
    for step in range(SETUP["steps"]):
        for rank in range(SETUP["world_size"]):
            batch = make_batch(workload, batch_size=SETUP["batch_size"], seed=SETUP["seed"], rank=rank, step=step,
                               device=CPU)  # fmt: skip
            with forward_precision(dtype, CPU):
                loss = workload.loss(model, batch)
            loss.backward()
            if rank == 0 and mistake == "bucket left out":
                rank0_grad = left_out.grad.clone()
        for p in model.parameters():
            if p.grad is not None and mistake != "sum, not mean":
                p.grad.div_(SETUP["world_size"])
        if mistake == "bucket left out":
            left_out.grad.copy_(rank0_grad)  # never all-reduced: rank 0 keeps its own gradient
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return reference.parameters_on_cpu(model)


@pytest.fixture(scope="module")
def workload():
    return workloads.create("mlp", size="tiny")


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
