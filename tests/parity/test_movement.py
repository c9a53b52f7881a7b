"""Parity's movement rule: a wrong reduction fails however little the parameter moves, and rounding passes."""

from __future__ import annotations

import types

import pytest
import torch

import workloads
from harness.handoff.rank_result import ParityVerdict
from harness.measure.training import OPTIMIZERS, build_model, make_batch
from harness.parity import movement, reference, verdict
from harness.results import values

CPU = torch.device("cpu")
SMALL = {"world_size": 2, "batch_size": 4, "steps": 3, "seed": 0, "device": CPU}


def trained_leaving_out(workload, left_out_index: int | None) -> dict[str, torch.Tensor]:
    """Two ranks' data in one process, every gradient averaged but one parameter's, which keeps rank 0's own."""
    model = build_model(workload, seed=SMALL["seed"], device=CPU)
    optimizer = OPTIMIZERS["sgd"][0](model.parameters(), lr=OPTIMIZERS["sgd"][1])
    params = list(model.parameters())
    for step in range(SMALL["steps"]):
        for rank in range(SMALL["world_size"]):
            batch = make_batch(workload, batch_size=SMALL["batch_size"], seed=SMALL["seed"], rank=rank, step=step,
                               device=CPU)  # fmt: skip
            workload.loss(model, batch).backward()
            if rank == 0 and left_out_index is not None:
                rank0_grad = params[left_out_index].grad.clone()
        for p in params:
            p.grad.div_(SMALL["world_size"])
        if left_out_index is not None:
            params[left_out_index].grad.copy_(rank0_grad)  # never reduced: rank 0 keeps its own gradient
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return reference.parameters_on_cpu(model)


def test_a_first_layer_left_out_of_the_reduction_passes_the_tolerance_but_fails_by_its_movement():
    workload = workloads.create("mlp", size="small")  # its first weight moves < 1e-6 in 3 SGD steps
    expected, initial = reference.reference_run(workload, **SMALL)
    moved = movement.movements(expected, initial)
    wrong = trained_leaving_out(workload, left_out_index=0)
    assert reference.compare(wrong, expected).within_tolerance  # the element-wise tolerance alone cannot see it
    name, share = movement.strayed(wrong, expected, moved)
    assert name == "0.weight" and share > movement.MOVED_SHARE
    assert movement.strayed(trained_leaving_out(workload, left_out_index=None), expected, moved) is None


def test_a_sum_for_a_mean_strays_by_the_whole_movement_and_a_rounding_step_does_not():
    initial = {"w": torch.full((1000,), 0.03)}
    step = torch.linspace(-1e-7, 1e-7, 1000)  # far below fp32's atol of 1e-5
    expected = {"w": initial["w"] + step}
    moved = movement.movements(expected, initial)
    summed = {"w": initial["w"] + 2 * step}
    assert reference.compare(summed, expected).within_tolerance
    assert movement.strayed(summed, expected, moved) == ("w", pytest.approx(1.0, rel=1e-2))
    rounded = {"w": torch.nextafter(expected["w"], torch.full_like(expected["w"], 1.0))}  # every element one ulp up
    assert movement.strayed(rounded, expected, moved) is None


def test_a_parameter_the_reference_never_moved_is_left_to_the_tolerance():
    still = {"w": torch.ones(4)}
    assert movement.strayed({"w": torch.ones(4) + 1e-6}, still, movement.movements(still, still)) is None


def test_the_verdict_fails_a_row_within_the_tolerance_that_strayed_and_says_why(monkeypatch):
    expected, moved = {"w": torch.zeros(3)}, {"w": 1e-7}
    monkeypatch.setattr(verdict, "cached_reference", lambda *a, **k: (expected, None, None, moved))
    cfg = types.SimpleNamespace(dtype="fp32", world_size=1, workload_spec="mlp", workload="mlp")
    judged = verdict.verdict(cfg, {"w": torch.full((3,), 1e-7)}, CPU)
    assert isinstance(judged, ParityVerdict) and judged.within_tolerance is False
    assert (
        judged.note.startswith("w ended 1.73× the reference's own movement")
        and "summed rather than averaged" in judged.note
    )


def test_under_a_sign_like_optimizer_the_tolerance_alone_judges(monkeypatch):
    expected, moved = {"w": torch.zeros(3)}, {"w": 1e-7}
    sign_like = reference.SignLike({}, 2e-3)
    monkeypatch.setattr(verdict, "cached_reference", lambda *a, **k: (expected, None, sign_like, moved))
    cfg = types.SimpleNamespace(dtype="fp32", world_size=1, workload_spec="mlp", workload="mlp")
    assert verdict.verdict(cfg, {"w": torch.full((3,), 1e-7)}, CPU).within_tolerance is True


def test_a_row_past_the_tolerance_that_strayed_says_its_share_of_the_movement_after_where(monkeypatch):
    expected, moved = {"w": torch.zeros(3)}, {"w": 1e-3}
    monkeypatch.setattr(verdict, "cached_reference", lambda *a, **k: (expected, None, None, moved))
    cfg = types.SimpleNamespace(dtype="fp32", world_size=1, workload_spec="mlp", workload="mlp")
    judged = verdict.verdict(cfg, {"w": torch.full((3,), 1e-3)}, CPU, how=", after the first 3 warm-up steps")
    assert judged.within_tolerance is False
    assert judged.note == (
        f"{reference.LARGEST_IN}w, after the first 3 warm-up steps; {movement.strayed_note('w', 3**0.5)}"
    )
    assert values.failed_parity_words({"parity_note": judged.note, "parity_max_abs_diff": 1e-3}).startswith(
        "max |Δ| 1.00e-03 in w, after the first 3 warm-up steps; w ended 1.73× the reference's own movement"
    )
