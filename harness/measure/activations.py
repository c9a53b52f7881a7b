"""The activations a forward keeps for backward: every tensor autograd saves in one forward and loss, each storage
once, by the kind of module that kept it; on the meta device (or a CPU's fake tensors) where the workload runs there,
at the rank's batch, under its autocast, or where the model computes in a strategy's dtype. Never a formula's estimate.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from typing import Any

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils._pytree import tree_map

from harness.bucketing import MIB
from harness.measure.counting import fake_cpu as _fake_cpu
from harness.measure.counting import flash_attention_kept as _flash_attention_kept
from harness.measure.counting import one_sequence_a_row as _one_sequence_a_row
from harness.measure.training import AUTOCAST_DTYPES, build_model, forward_precision
from harness.protocols import Workload

SEED = 0
META = torch.device("meta")


def activations_on_meta(workload: Workload, *, batch_size: int, dtype: str) -> dict[str, Any]:
    """`counts_on_meta`'s activations alone (`activation_mb`, `activation_top`), without its sizes: where only they
    differ (one sample more, or bf16's beside fp32's), the model's parameters need no second count."""
    try:
        return kept_summary(_saved_bytes(workload, batch_size=batch_size, device=META, dtype=dtype))
    except Exception as exc:  # a value read (.item(), `if tensor.any()`) or an op without a meta kernel
        return {"activation_mb": None, "activation_top": None, "activation_meta_error": gist(exc)}


def gist(exc: BaseException) -> str:
    """An exception's first line, or its class where it has no message: why a count failed, said in one clause."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def activations_on_cpu(workload: Workload, *, batch_size: int, dtype: str) -> dict[str, Any]:
    """`activations_on_meta`'s figures counted on this CPU (real tensors: a forward that reads values, as a mixture of
    experts' routing does, runs here), for a model the meta device cannot run; `activation_cpu_error` where it cannot
    be counted here either (this machine's memory, say), said in one clause."""
    try:
        with torch.random.fork_rng():  # the build seeds torch's generator: the caller's is left as it was
            return kept_summary(_saved_bytes(workload, batch_size=batch_size, device=torch.device("cpu"), dtype=dtype))
    except Exception as exc:
        return {"activation_mb": None, "activation_top": None, "activation_cpu_error": gist(exc)}


def _activations(
    workload: Workload, *, batch_size: int, device: torch.device, dtype: str, on_meta: bool
) -> dict[str, Any]:
    """`activation_mb` and `activation_top`; null where the count failed (out of memory, say), which must not
    cost the sizes and FLOPs counted beside it."""
    try:
        kept = activations_by_module(workload, batch_size=batch_size, device=device, dtype=dtype, on_meta=on_meta)
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return {"activation_mb": None, "activation_top": None}
    return kept_summary(kept)


def activation_bytes(workload: Workload, *, batch_size: int, device: torch.device, dtype: str) -> int:
    """`activations_by_module`, all together."""
    return sum(activations_by_module(workload, batch_size=batch_size, device=device, dtype=dtype).values())


def activations_by_module(
    workload: Workload, *, batch_size: int, device: torch.device, dtype: str, on_meta: bool = True
) -> dict[str, int]:
    """Bytes autograd keeps for backward once one batch's forward and loss are done: every tensor saved for
    backward (`saved_tensors_hooks`), each storage once (a tensor saved by two operations, or a view of one
    saved, is one allocation), the parameters and buffers left out (model state: the held_* columns).

    At the rank's own batch, under the run's autocast (its low-precision copies of weights kept for backward
    are in it: not parameters, but memory a bf16 run holds beside them). Counted on the meta device (no memory,
    no compute) where the workload runs there in fp32 (`on_meta` False: describe's FLOP count found it does
    not), else on `device`. Attention is counted as a flash kernel
    keeps it (`_flash_attention_kept`): what a GPU's SDPA runs. Not in it: the forward's temporaries freed before
    backward, backward's own working memory, DDP's buckets and FSDP's gathered parameters.

    By the kind of module that kept them (the class of the innermost module running when a tensor was saved;
    LOSS outside the model), so that the page can say why: HF GPT-2's tanh GELU, in Python operations, keeps four
    tensors of the MLP's width a layer, half of all it keeps."""
    if dtype == "fp32" and on_meta:  # autocast has no meta device; on_meta False: the FLOP count found it fails
        with contextlib.suppress(Exception):  # a value read (.item()) or an op without a meta kernel
            return _saved_bytes(workload, batch_size=batch_size, device=META, dtype=dtype)
    return _saved_bytes(workload, batch_size=batch_size, device=device, dtype=dtype)


LOSS = "the loss"
"""Who kept a tensor saved outside every module of the model: the workload's loss."""


def kept_summary(kept: dict[str, int]) -> dict[str, Any]:
    """`activation_mb` and `activation_top` of what `activations_by_module` (or `_saved_bytes`) counted."""
    return {"activation_mb": sum(kept.values()) / MIB, "activation_top": largest_keepers(kept)}


def largest_keepers(kept: dict[str, int], *, most: int = 3, share: float = 0.05) -> str:
    """'NewGELUActivation 48%, the loss 16%, Conv1D 15%': the kinds of module that keep the most, each with its
    share of all, up to `most` of them and none under `share`."""
    total = sum(kept.values())
    ranked = sorted(kept.items(), key=lambda item: -item[1])[:most]
    return ", ".join(f"{name} {nbytes / total:.0%}" for name, nbytes in ranked if total and nbytes >= share * total)


def activations_computing_in(workload: Workload, *, batch_size: int, param_dtype: str) -> dict[str, Any] | None:
    """`activation_mb` and `activation_top` where the model computes in `param_dtype` (a strategy's, as FSDP2's
    param_dtype=bf16 in an fp32 run: `_compute_in`), counted on the meta device; None where it cannot be."""
    try:
        kept = _saved_bytes(workload, batch_size=batch_size, device=META, dtype="fp32",
                            compute_dtype=AUTOCAST_DTYPES[param_dtype])  # fmt: skip
    except Exception:  # a value read (.item()) or an op without a meta kernel
        return None
    return kept_summary(kept)


def _compute_in(model: nn.Module, dtype: torch.dtype) -> None:
    """The model as FSDP2's MixedPrecisionPolicy(param_dtype=dtype) runs it under ddpbench's fsdp: every parameter
    in `dtype` (its buffers left as they are) but a BatchNorm's, which computes in fp32 from its input cast up and
    hands its output on in `dtype`; the root's floating-point inputs cast to `dtype` (cast_forward_inputs)."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    in_norms = {id(p) for norm in norms for p in norm.parameters()}
    for param in model.parameters():
        if id(param) not in in_norms:
            param.data = param.data.to(dtype)

    def cast(value: Any, to: torch.dtype) -> Any:
        return tree_map(lambda x: x.to(to) if isinstance(x, torch.Tensor) and x.is_floating_point() else x, value)

    for norm in norms:
        norm.register_forward_pre_hook(lambda module, args: cast(args, torch.float32))
        norm.register_forward_hook(lambda module, args, output: cast(output, dtype))
    model.register_forward_pre_hook(lambda module, args, kwargs: (cast(args, dtype), cast(kwargs, dtype)),
                                    with_kwargs=True)  # fmt: skip


def _fake_built(workload: Workload, counting) -> nn.Module:
    """The model as a CPU's fake tensors: built in the fake mode, or where its initialisation reads a value (a
    truncated normal's bounds: torchvision's convnext and vit), built on the meta device and given fake storage."""
    from torch._subclasses.fake_tensor import DataDependentOutputException

    try:
        with counting:
            return build_model(workload, seed=SEED, device=torch.device("cpu"))
    except DataDependentOutputException:
        model = build_model(workload, seed=SEED, device=torch.device("meta"))
        with counting:
            return model.to_empty(device="cpu")  # the sizes and dtypes alone: no value of them is read


def _saved_bytes(
    workload: Workload, *, batch_size: int, device: torch.device, dtype: str, compute_dtype: torch.dtype | None = None
) -> dict[str, int]:
    made_on = torch.device("cpu") if device.type == "meta" else device  # no generator on the meta device
    fake = device.type == "meta" and dtype != "fp32"  # autocast has no meta device: a CPU's fake tensors have it
    counting = _fake_cpu() if fake else contextlib.nullcontext()  # (fake: sizes alone, no memory, as on meta)
    model = _fake_built(workload, counting) if fake else build_model(workload, seed=SEED, device=device)
    if compute_dtype is not None:
        _compute_in(model, compute_dtype)
    generator = torch.Generator(device=made_on)
    generator.manual_seed(SEED)
    batch = workload.make_batch(batch_size, device=made_on, generator=generator)
    if device.type == "meta" and not fake:
        batch = tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, batch)
    state = {_storage_key(t) for t in (*model.parameters(), *model.buffers())}
    kept: dict[int, tuple[str, int, Any]] = {}
    running: list[str] = []  # the classes of the modules whose forward is running, innermost last

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if (key := _storage_key(tensor)) not in state and key not in kept:  # the storage held: no key is reused
            kept[key] = (running[-1] if running else LOSS, storage.nbytes(), storage)
        return tensor  # the tensor itself: nothing copied

    flash = _flash_attention_kept() if device.type in ("meta", "cpu") else contextlib.nullcontext()
    unpacked = _one_sequence_a_row() if device.type == "meta" else contextlib.nullcontext()  # after the build's imports

    def enter(module: nn.Module, args: Any) -> None:  # a hook that returned a value would replace the inputs
        running.append(type(module).__name__)

    def leave(module: nn.Module, args: Any, output: Any) -> None:  # and here, the output
        running.pop()

    entered, left = register_module_forward_pre_hook(enter), register_module_forward_hook(leave)
    try:
        with (
            counting,
            flash,
            unpacked,
            forward_precision(dtype, made_on),
            torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t),
        ):
            loss = workload.loss(model, batch)
    finally:
        entered.remove()
        left.remove()
    del loss, model, batch
    by_module: dict[str, int] = {}
    for owner, nbytes, _ in kept.values():
        by_module[owner] = by_module.get(owner, 0) + nbytes
    return by_module


def _storage_key(tensor: torch.Tensor) -> int:
    """The storage a tensor (or a view of it) lives in: the storage's own handle, which views share; not its
    address, which on the meta device is 0 for every storage."""
    return tensor.untyped_storage()._cdata
