"""Gradient parity: did the strategy train exactly like one process on the whole batch?

The reference is one process that, for every step, runs each rank's batch in turn,
accumulating gradients, then divides by the number of ranks and steps the optimizer.
For models whose loss is a mean over independent samples that equals one process on the
concatenated batch; for BatchNorm it is what data parallelism without SyncBatchNorm means
(statistics per rank's batch). Parameters are compared; buffers are not (DDP broadcasts
rank 0's buffers, which no single-process run reproduces).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import nn

from harness.protocols import Workload
from harness.training import OPTIMIZERS, build_model, forward_precision, make_batch

# (atol, rtol) per parameter dtype after a few steps.
TOLERANCE = {
    torch.float64: (1e-8, 1e-6),
    torch.float32: (1e-5, 1e-4),
    torch.bfloat16: (1e-2, 1e-2),
    torch.float16: (1e-3, 1e-3),
}


@dataclasses.dataclass(frozen=True)
class ParityResult:
    max_abs_diff: float
    within_tolerance: bool
    worst_parameter: str | None


def reference_parameters(
    workload: Workload,
    *,
    world_size: int,
    batch_size: int,
    steps: int,
    seed: int,
    device: torch.device,
    dtype: str = "fp32",
    optimizer: str = "sgd",
    on_step: Callable[[int], None] | None = None,
) -> dict[str, torch.Tensor]:
    """Parameters of the single-process reference after `steps` steps, on the CPU.

    `on_step(step)` after each step tells the launcher the reference is still moving.
    """
    model = build_model(workload, seed=seed, device=device)
    optimizer_cls, learning_rate = OPTIMIZERS[optimizer]
    optimizer = optimizer_cls(model.parameters(), lr=learning_rate)
    for step in range(steps):
        for rank in range(world_size):
            batch = make_batch(workload, batch_size=batch_size, seed=seed, rank=rank, step=step, device=device)
            with forward_precision(dtype, device):
                loss = workload.loss(model, batch)
            loss.backward()
        for p in model.parameters():
            if p.grad is not None:
                p.grad.div_(world_size)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if on_step is not None:
            on_step(step)
    return parameters_on_cpu(model)


def parameters_on_cpu(model: nn.Module) -> dict[str, torch.Tensor]:
    """Named parameters (each tied parameter once), copied to the CPU."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters()}


def state_on_cpu(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: t.detach().to("cpu", copy=True) for name, t in state.items()}


def compare(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> ParityResult:
    missing = sorted(set(expected) - set(actual))
    if missing:
        raise KeyError(f"parameters missing from the strategy's state: {missing[:5]}")
    worst_name, worst_diff, ok = None, 0.0, True
    for name, ref in expected.items():
        got = actual[name].to(ref.dtype)
        diff = (got.double() - ref.double()).abs().max().item() if ref.numel() else 0.0
        atol, rtol = TOLERANCE.get(ref.dtype, TOLERANCE[torch.float32])
        ok = ok and torch.allclose(got, ref, atol=atol, rtol=rtol)
        if diff >= worst_diff:
            worst_name, worst_diff = name, diff
    return ParityResult(max_abs_diff=worst_diff, within_tolerance=ok, worst_parameter=worst_name)
