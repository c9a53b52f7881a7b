"""What a workload's model is: parameter counts, gradient volume and measured FLOPs per sample.

The runner records these next to each configuration so that reports can turn step times
into achieved FLOP/s and bytes communicated, and explain why one model scales worse than
another. FLOPs are counted by `torch.utils.flop_counter.FlopCounterMode` over one real
forward+backward, never from hand formulas, so they stay right for every new workload.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import FlopCounterMode

from harness.measure.training import build_model
from harness.protocols import Workload
from harness.results.layout import RunFolder, safe_name

FLOP_COUNT_SAMPLES = 2
"""Samples in the batch whose FLOPs are counted: small enough to be cheap, and at least 2
because a BatchNorm over a 1×1 feature map cannot train on one sample."""

SEED = 0


def describe_once(
    workload: Workload, *, key: tuple, batch_size: int, device: torch.device, run: Path, cache: dict[tuple, dict | None]
) -> dict[str, Any] | None:
    """`describe`, once per workload setup `key` in a run: later configurations (and the run's
    later launches, through a file in the run folder) reuse it. None where the workload cannot run
    on `device`, or where counting failed, which must not cost the measurement (a nicety)."""
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
            cache[key] = describe(workload, batch_size=batch_size, device=device)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            cache[key] = None
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cache[key]))
    return cache[key]


def describe(workload: Workload, *, batch_size: int, device: torch.device | str) -> dict[str, Any]:
    """Sizes and FLOPs of the workload's model, built afresh (the caller's RNG is untouched).

    FLOPs depend on shapes only, so they are counted on the meta device (no compute, no memory:
    resnet50/small in 0.04 s instead of 2.4 s on a CPU) where the workload runs there; a workload
    that reads values (gpt2's loss calls .item()) is counted on `device` instead, one
    forward+backward of FLOP_COUNT_SAMPLES samples: pass the GPU for `full` sizes.
    """
    device = torch.device(device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        info = _describe_on_meta(workload)
        if info is None:
            model = build_model(workload, seed=SEED, device=device)
            info = parameter_sizes(model)
            info["flops_per_sample"] = flops_per_sample(workload, model, device=device)
    tokens = workload.tokens_per_sample()
    info["samples_per_batch"] = batch_size
    info["tokens_per_batch"] = tokens * batch_size if tokens is not None else None
    return info


META = torch.device("meta")


def _describe_on_meta(workload: Workload) -> dict[str, Any] | None:
    """`describe`'s sizes and FLOPs from a model and batch on the meta device; None where the
    workload cannot run there."""
    try:
        with META:
            model = workload.build_model()
        info = parameter_sizes(model)
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


def parameter_count_on_meta(workload: Workload) -> int:
    """Parameters of the workload's model, built on the meta device: no memory, no time."""
    with torch.device("meta"):
        model = workload.build_model()
    return sum(p.numel() for p in dict(model.named_parameters()).values())


def grad_bytes_on_meta(workload: Workload) -> int:
    """Gradient bytes of the workload's model (trainable parameters, tied ones once), built on the meta device."""
    with torch.device("meta"):
        model = workload.build_model()
    return parameter_sizes(model)["grad_bytes"]


def flops_per_sample(workload: Workload, model: nn.Module, *, device: torch.device) -> float:
    """FLOPs of one training forward+backward, per sample, as FlopCounterMode counts them.

    Attention runs on SDPA's math backend while counting: FlopCounterMode has no formula for
    the fused CPU kernel, whereas the math backend is plain matmuls it does count.
    """
    made_on = torch.device("cpu") if device.type == "meta" else device  # no generator on the meta device
    generator = torch.Generator(device=made_on)
    generator.manual_seed(SEED)
    batch = workload.make_batch(FLOP_COUNT_SAMPLES, device=made_on, generator=generator)
    if device.type == "meta":
        batch = tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, batch)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        workload.loss(model, batch).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / FLOP_COUNT_SAMPLES


def _bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()
