"""What a workload's model is: parameter counts, gradient volume, measured FLOPs per sample and activations.

The runner records these next to each configuration so that reports can turn step times
into achieved FLOP/s and bytes communicated, and explain why one model scales worse than
another. FLOPs are counted by `torch.utils.flop_counter.FlopCounterMode` over one real
forward+backward, never from hand formulas, so they stay right for every new workload. The
activations likewise: what autograd saves for backward in one forward, never a formula's estimate.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import FlopCounterMode

from harness.blocks import model_blocks, record_blocks
from harness.measure.activations import META, SEED, _activations, activations_on_meta
from harness.measure.counting import FLOP_FORMULAS
from harness.measure.counting import one_sequence_a_row as _one_sequence_a_row
from harness.measure.training import build_model
from harness.protocols import Workload
from harness.results.layout import RunFolder, safe_name

FLOP_COUNT_SAMPLES = 2
"""Samples in the batch whose FLOPs are counted: small enough to be cheap, and at least 2
because a BatchNorm over a 1×1 feature map cannot train on one sample."""


def describe_once(
    workload: Workload,
    *,
    key: tuple,
    batch_size: int,
    device: torch.device,
    run: Path,
    cache: dict[tuple, dict | None],
    dtype: str = "fp32",
    count: Callable[[], dict[str, Any] | None] | None = None,
) -> dict[str, Any] | None:
    """`describe`, once per workload setup `key` in a run: later configurations (and the run's
    later launches, through a file in the run folder) reuse it. None where the workload cannot run
    on `device`, or where counting failed, which must not cost the measurement (a nicety). `count`: how it is
    counted where the run has not yet (`describe`, or the rank's through the user's cache, `meta_counts.described`)."""
    if key in cache:
        return cache[key]
    if workload.unavailable_reason(device=device.type):
        cache[key] = None
        return None
    path = RunFolder(run).cached("modelinfo-" + safe_name("-".join(map(str, key)), limit=120) + ".json")
    try:
        cache[key] = json.loads(path.read_text())
    except (OSError, ValueError):
        try:
            cache[key] = (count or functools.partial(describe, workload, batch_size=batch_size, device=device,
                                                     dtype=dtype))()  # fmt: skip
        except Exception:
            traceback.print_exc(file=sys.stderr)
            cache[key] = None
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cache[key]))
    return cache[key]


def describe(workload: Workload, *, batch_size: int, device: torch.device | str, dtype: str = "fp32") -> dict[str, Any]:
    """Sizes and FLOPs of the workload's model, built afresh (the caller's RNG is untouched), and the bytes its
    forward keeps for backward at `batch_size` samples under `dtype` (`activation_mb`) and who keeps the most
    (`activation_top`: activations_by_module, largest_keepers).

    FLOPs depend on shapes only, so they are counted on the meta device (no compute, no memory:
    resnet50/small in 0.04 s instead of 2.4 s on a CPU) where the workload runs there; a workload
    that reads values (gpt2's loss calls .item()) is counted on `device` instead, one
    forward+backward of FLOP_COUNT_SAMPLES samples: pass the GPU for `full` sizes.
    """
    device = torch.device(device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        info = _describe_on_meta(workload)
        on_meta = info is not None  # the workload runs on the meta device: its activations can be counted there
        if info is None:
            model = build_model(workload, seed=SEED, device=device)
            info = {**parameter_sizes(model), **shard_units(workload, model)}
            info["flops_per_sample"] = flops_per_sample(workload, model, device=device)
            del model  # before the count builds its own
        info.update(_activations(workload, batch_size=batch_size, device=device, dtype=dtype, on_meta=on_meta))
    tokens = workload.tokens_per_sample()
    info["samples_per_batch"] = batch_size
    info["tokens_per_batch"] = tokens * batch_size if tokens is not None else None
    return info


def _describe_on_meta(workload: Workload) -> dict[str, Any] | None:
    """`describe`'s sizes and FLOPs from a model and batch on the meta device; None where the
    workload cannot run there."""
    try:
        with META:
            model = workload.build_model()
        info = {**parameter_sizes(model), **shard_units(workload, model)}
        info["flops_per_sample"] = flops_per_sample(workload, model, device=META)
    except Exception:  # e.g. a value read (.item()) or an op without a meta kernel
        return None
    return info


def parameter_sizes(model: nn.Module) -> dict[str, Any]:
    """Counts and bytes of the parameters, each shared (tied) parameter counted once."""
    named = dict(model.named_parameters())  # named_parameters() yields a tied tensor once
    trainable = [p for p in named.values() if p.requires_grad]
    largest_name = max(named, key=lambda name: _bytes(named[name]), default=None)
    return {
        "param_count": sum(p.numel() for p in named.values()),
        "trainable_param_count": sum(p.numel() for p in trainable),
        "param_tensors": len(named),
        "grad_bytes": sum(_bytes(p) for p in trainable),
        "largest_param_name": largest_name,
        "largest_param_bytes": _bytes(named[largest_name]) if largest_name is not None else 0,
    }


def shard_units(workload: Workload, model: nn.Module) -> dict[str, int]:
    """The sizes of what a strategy that shards parameters block by block (`fsdp`) holds whole at its peak: every
    parameter's bytes; the root's (what no block holds), all of them and the trained ones (their gradients); the
    largest block's, all and trained; the blocks as `harness.blocks.model_blocks` finds them."""
    record_blocks(model, workload.blocks(model))
    blocks = model_blocks(model)
    in_blocks = {id(p) for block in blocks for p in block.parameters()}
    every = dict(model.named_parameters()).values()  # shared parameters once
    root = [p for p in every if id(p) not in in_blocks]
    trained = [sum(_bytes(p) for p in b.parameters() if p.requires_grad) for b in blocks]
    return {
        "param_bytes": sum(_bytes(p) for p in every),
        "root_param_bytes": sum(_bytes(p) for p in root),
        "root_grad_bytes": sum(_bytes(p) for p in root if p.requires_grad),
        "largest_block_bytes": max((sum(_bytes(p) for p in b.parameters()) for b in blocks), default=0),
        "largest_block_grad_bytes": max(trained, default=0),
    }


def parameter_count_on_meta(workload: Workload) -> tuple[int, int, int, tuple[str, ...]]:
    """Parameters of the workload's model, built on the meta device: no memory, no time; the fields of
    `meta_counts.ParameterCount` (which `meta_counts.parameters` keeps and gives)."""
    with torch.device("meta"):
        model = workload.build_model()
    params = dict(model.named_parameters()).values()
    trained = [p for p in params if p.requires_grad]
    dtypes = tuple(sorted({str(p.dtype).removeprefix("torch.") for p in trained}))
    return sum(p.numel() for p in params), sum(p.numel() for p in trained), sum(_bytes(p) for p in trained), dtypes


def counts_on_meta(workload: Workload, *, batch_size: int, dtype: str) -> dict[str, Any] | None:
    """`describe`'s sizes, shard units and activations, from the meta device alone (a model too large to build
    here: a full size profiled at a smaller one), each trained parameter's bytes and dtype in the order the
    model registers them (`grad_sizes`, `grad_dtypes`), and every parameter's (`parameters`: `parameter_table`);
    None where the model cannot run there. Its activations are null where they cannot be counted there; a run in
    bf16 has them counted on a CPU's fake tensors under the CPU's autocast (it has no meta device: _saved_bytes)."""
    try:
        with META:
            model = workload.build_model()
        info = {**parameter_sizes(model), **shard_units(workload, model)}
    except Exception:  # a model that cannot be built without its values
        return None
    trained = [p for p in dict(model.named_parameters()).values() if p.requires_grad]
    counted = activations_on_meta(workload, batch_size=batch_size, dtype=dtype)
    sizes = {"grad_sizes": [_bytes(p) for p in trained], "grad_dtypes": [str(p.dtype) for p in trained]}
    tokens = workload.tokens_per_sample()  # the full size's may be another sequence length than the run's
    counted["tokens_per_batch"] = tokens * batch_size if tokens is not None else None
    return {**info, **counted, **sizes, "parameters": parameter_table(model)}


def parameter_table(model: nn.Module) -> list[tuple[int, str, bool, int | None, str]]:
    """Every parameter (a tied one once) in registration order: its bytes, dtype, whether it trains, the index
    of the block holding it (`model_blocks`, as a sharding strategy wraps them; None: the root's), and its name."""
    block_of = {id(p): k for k, block in enumerate(model_blocks(model)) for p in block.parameters()}
    return [(_bytes(p), str(p.dtype).removeprefix("torch."), p.requires_grad, block_of.get(id(p)), name)
            for name, p in dict(model.named_parameters()).items()]  # fmt: skip


def flops_per_sample(workload: Workload, model: nn.Module, *, device: torch.device) -> float:
    """FLOPs of one training forward+backward, per sample, as FlopCounterMode counts them.

    Attention runs on SDPA's math backend while counting: FlopCounterMode has no formula for
    the fused CPU kernel, whereas the math backend is plain matmuls it does count. A convolution's
    backward is counted by `counting.FLOP_FORMULAS`, torch's own overcounting a grouped one.
    """
    made_on = torch.device("cpu") if device.type == "meta" else device  # no generator on the meta device
    generator = torch.Generator(device=made_on)
    generator.manual_seed(SEED)
    batch = workload.make_batch(FLOP_COUNT_SAMPLES, device=made_on, generator=generator)
    if device.type == "meta":
        batch = tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, batch)
    unpacked = _one_sequence_a_row() if device.type == "meta" else contextlib.nullcontext()  # (transformers' .item())
    with (
        sdpa_kernel(SDPBackend.MATH),
        unpacked,
        FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as counter,
    ):
        workload.loss(model, batch).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / FLOP_COUNT_SAMPLES


def _bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()
