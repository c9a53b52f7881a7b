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


def trained(workload, setup: dict, reduced) -> dict[str, torch.Tensor]:
    """The ranks' data in one process, each parameter's gradient `reduced(index, ranks' gradients)` before each step."""
    model = build_model(workload, seed=setup["seed"], device=CPU)
    optimizer = OPTIMIZERS["sgd"][0](model.parameters(), lr=OPTIMIZERS["sgd"][1])
    params = list(model.parameters())
    for step in range(setup["steps"]):
        grads = []
        for rank in range(setup["world_size"]):
            batch = make_batch(workload, batch_size=setup["batch_size"], seed=setup["seed"], rank=rank, step=step,
                               device=CPU)  # fmt: skip
            workload.loss(model, batch).backward()
            grads.append([p.grad.clone() for p in params])
            optimizer.zero_grad(set_to_none=True)
        for index, p in enumerate(params):
            p.grad = reduced(index, [each[index] for each in grads])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return reference.parameters_on_cpu(model)


def averaged_leaving_out(left_out_index: int | None):
    """Every gradient averaged but one parameter's, which keeps rank 0's own (never reduced)."""
    return lambda index, grads: grads[0] if index == left_out_index else torch.stack(grads).sum(0) / len(grads)


def averaged_pairwise(index: int, grads: list[torch.Tensor]) -> torch.Tensor:
    """The mean in another order of summing, as a ring or a tree all-reduce adds: each divided first, then in pairs."""
    grads = [g / len(grads) for g in grads]
    while len(grads) > 1:
        grads = [sum(grads[k : k + 2]) for k in range(0, len(grads), 2)]
    return grads[0]


def judged_movements(workload, setup: dict, final, initial) -> dict[str, float]:
    """The movements the rule judges, as verdict.cached_reference keeps them."""
    nudged, _ = reference.reference_run(workload, **setup, nudged=True)
    return movement.beyond_rounding(movement.movements(final, initial), movement.movements(nudged, final))


def test_a_first_layer_left_out_of_the_reduction_passes_the_tolerance_but_fails_by_its_movement():
    workload = workloads.create("mlp", size="small")  # its first weight moves < 1e-6 in 3 SGD steps
    expected, initial = reference.reference_run(workload, **SMALL)
    moved = judged_movements(workload, SMALL, expected, initial)
    assert moved["0.weight"] > 0  # judged: rounding does not move it
    wrong = trained(workload, SMALL, averaged_leaving_out(0))
    assert reference.compare(wrong, expected).within_tolerance  # the element-wise tolerance alone cannot see it
    name, share = movement.strayed(wrong, expected, moved)
    assert name == "0.weight" and share > movement.MOVED_SHARE
    assert movement.strayed(trained(workload, SMALL, averaged_leaving_out(None)), expected, moved) is None


def test_a_parameter_whose_gradient_is_rounding_is_not_failed_for_another_order_of_summing():
    """BERT's key bias has a gradient of 0 (softmax ignores a shift of every key's score): what is computed is
    rounding, which another order of summing at 4 ranks changes whole; stock DDP failed the rule so (0.75×)."""
    workload = workloads.create("bert", size="tiny")
    setup = {**SMALL, "world_size": 4}
    expected, initial = reference.reference_run(workload, **setup)
    right = trained(workload, setup, averaged_pairwise)
    assert reference.compare(right, expected).within_tolerance
    name, _ = movement.strayed(right, expected, movement.movements(expected, initial))  # what every parameter judged
    assert name.endswith("attention.self.key.bias")
    moved = judged_movements(workload, setup, expected, initial)
    left = {other for other, went in movement.movements(expected, initial).items() if went and not moved[other]}
    assert left == {f"bert.encoder.layer.{k}.attention.self.key.bias" for k in range(2)}  # those alone
    assert movement.strayed(right, expected, moved) is None


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


def test_a_row_not_judged_by_design_is_not_said_to_hold_a_wrong_reduction(monkeypatch):
    """`local` never reduces and a lossy hook compresses: their rows say 'not judged', and the rule's note, which
    names a wrong reduction and says 'fails', contradicted that on every run's baseline at 2 ranks (1.80×)."""
    expected, moved = {"w": torch.zeros(3)}, {"w": 1e-7}
    monkeypatch.setattr(verdict, "cached_reference", lambda *a, **k: (expected, None, None, moved))
    cfg = types.SimpleNamespace(dtype="fp32", world_size=1, workload_spec="mlp", workload="mlp")
    strayed_state = {"w": torch.full((3,), 1e-7)}
    assert "summed rather than averaged" in verdict.verdict(cfg, strayed_state, CPU).note  # judged: said
    not_judged = verdict.verdict(cfg, strayed_state, CPU, exact=False)
    assert not_judged.note == f"{reference.LARGEST_IN}w" and not_judged.within_tolerance is True
