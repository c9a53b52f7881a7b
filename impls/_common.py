"""Pieces several strategies share. Private (leading underscore): not a plug-in."""

import torch
import torch.distributed as dist
from torch import nn


@torch.no_grad()
def broadcast_module_state(model: nn.Module, *, src: int = 0) -> None:
    """Make every rank start from rank `src`'s parameters and buffers, as DDP does at wrap."""
    for tensor in [*model.parameters(), *model.buffers()]:
        dist.broadcast(tensor.data, src=src)


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Parameters that get gradients, each once even when shared (tied) between modules."""
    return [p for p in model.parameters() if p.requires_grad]


def zero_missing_grads(params: list[nn.Parameter]) -> None:
    """A parameter that got no gradient on this rank still takes part in the all-reduce."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
