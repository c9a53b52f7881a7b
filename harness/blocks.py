"""A model's blocks: the units a sharding strategy (`fsdp`) wraps one by one and the profile times, as the model's
workload names them (`Workload.blocks`, recorded on the built model) or as guessed from its repeated layers."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the command line's flags are checked before torch's 2-3 s import
    from torch import nn


BLOCKS_ATTRIBUTE = "_ddpbench_blocks"
"""Where the harness leaves a built model's `Workload.blocks`, for the strategy that wraps it."""


def record_blocks(model: nn.Module, blocks: list[nn.Module] | None) -> None:
    """Called by the harness when it builds a workload's model (a plain attribute: no submodule)."""
    model.__dict__[BLOCKS_ATTRIBUTE] = blocks


def recorded_blocks(model: nn.Module) -> list[nn.Module] | None:
    """The blocks the model's workload named, or None (unknown, or not built by the harness)."""
    return model.__dict__.get(BLOCKS_ATTRIBUTE)


def model_blocks(model: nn.Module) -> list[nn.Module]:
    """The modules a sharding strategy (`fsdp`) wraps one by one, below the root: those the model's workload names
    (`Workload.blocks`), else `guessed_blocks`. A module sharing a parameter with another (tied
    weights) is left to the root, which also takes whatever no block holds (embeddings, stems,
    heads): a parameter is sharded once."""
    named = recorded_blocks(model)
    candidates = named if named is not None else guessed_blocks(model)
    shared = shared_parameters(model)
    return [block for block in candidates if not any(id(p) in shared for p in block.parameters())]


def guessed_blocks(model: nn.Module) -> list[nn.Module]:
    """A guess at the model's repeated blocks from its shape: the elements of the outermost lists
    of repeated layers (a ModuleList, or a Sequential of one class): GPT-2's `transformer.h`,
    BERT's `encoder.layer`, ViT's `encoder.layers`, the blocks of ResNet's stages of two or more.
    Without any, the root's children that hold parameters (each Linear of an MLP `nn.Sequential`)."""
    return _repeated_blocks(model) or [child for child in model.children() if has_parameters(child)]


def _repeated_blocks(model: nn.Module) -> list[nn.Module]:
    found: list[nn.Module] = []
    inside: set[int] = set()
    for module in model.modules():  # pre-order: an outer list comes before anything inside it
        if module is model or id(module) in inside or not _is_list_of_layers(module):
            continue
        found += [child for child in module.children() if has_parameters(child)]
        inside.update(id(m) for m in module.modules())
    return found


def _is_list_of_layers(module: nn.Module) -> bool:
    from torch import nn  # here, not at the top: the command line is checked before torch's import

    if isinstance(module, nn.ModuleList):
        return True
    children = list(module.children())
    return isinstance(module, nn.Sequential) and len(children) > 1 and len({type(c) for c in children}) == 1


def shared_parameters(model: nn.Module) -> set[int]:
    """Ids of parameters reachable from more than one module (tied weights)."""
    uses = Counter(id(p) for module in model.modules() for p in module.parameters(recurse=False))
    return {pid for pid, count in uses.items() if count > 1}


def has_parameters(module: nn.Module) -> bool:
    return next(module.parameters(), None) is not None
