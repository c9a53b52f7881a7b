"""What a rank holds: its parameters', gradients' and optimizer state's bytes (a sharded strategy's shard
only), sized from the live tensors, and the same in MiB as the ranks and configs tables record it."""

from __future__ import annotations

import torch
from torch import nn

from harness.bucketing import MIB as MB  # MiB, as every `_mb` column


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard, else the tensor. Asked by its `to_local`, not by class: DTensor's module is
    torch.distributed.tensor from torch 2.5 only (2.4's is ._tensor), and this runs in every configuration."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


def local_nbytes(tensor: torch.Tensor) -> int:
    """Bytes this rank stores for `tensor`: a DTensor's local shard, not its global size."""
    local = _local(tensor)
    return local.numel() * local.element_size()


def _local_optimizer(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The optimizer that really holds state: ZeroRedundancyOptimizer keeps its shard's in `.optim`."""
    inner = getattr(optimizer, "optim", None)
    return inner if isinstance(inner, torch.optim.Optimizer) else optimizer


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the tensors this rank's optimizer holds as state (e.g. Adam's moments and step)."""
    return sum(
        local_nbytes(value)
        for state in _local_optimizer(optimizer).state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    )


def held_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Parameter, gradient and optimizer-state bytes this rank holds (shards only, for sharded strategies).

    Sizes of live tensors, not allocator statistics: call it after `optimizer.step()` and before
    `zero_grad(set_to_none=True)` to see gradients too. A tied parameter counts once; buffers
    outside `.grad` (DDP's buckets, FSDP's gather buffers) are not counted.
    """
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    return {
        "param_bytes": sum(local_nbytes(p) for p in params),
        "grad_bytes": sum(local_nbytes(g) for g in grads),
        "optimizer_state_bytes": optimizer_state_bytes(optimizer),
        "grad_view_bytes": sum(local_nbytes(g) for g in grads if _inside_larger_storage(g)),
    }


def _inside_larger_storage(tensor: torch.Tensor) -> bool:
    """A view into a larger allocation (a gradient that is a slice of its strategy's flat bucket), not a tensor of
    its own."""
    local = _local(tensor)
    return local.untyped_storage().nbytes() > local.numel() * local.element_size()


def held_as_row(held: dict[str, int] | None) -> dict[str, float | None]:
    """held_bytes in MiB, as the ranks and configs tables record it (null where not measured)."""
    held = held or {}
    return {
        "held_param_mb": held["param_bytes"] / MB if "param_bytes" in held else None,
        "held_grad_mb": held["grad_bytes"] / MB if "grad_bytes" in held else None,
        "held_optimizer_state_mb": held["optimizer_state_bytes"] / MB if "optimizer_state_bytes" in held else None,
        "held_grad_view_mb": held["grad_view_bytes"] / MB if "grad_view_bytes" in held else None,
        "held_ahead_batches_mb": held["ahead_batch_bytes"] / MB if "ahead_batch_bytes" in held else None,
    }


def batch_bytes(batches) -> int:
    """The bytes of every tensor in `batches` (tensors, or tuples, lists and dicts of them, nested): gradient
    accumulation's micro-batches made ahead of their forward, held through the step (`held_ahead_batches_mb`)."""
    if isinstance(batches, torch.Tensor):
        return local_nbytes(batches)
    if isinstance(batches, dict):
        return batch_bytes(list(batches.values()))
    if isinstance(batches, (tuple, list)):
        return sum(batch_bytes(part) for part in batches)
    return 0  # not a tensor: no bytes of a batch's tensors
