"""`fsdp`: FSDP2 (`torch.distributed.fsdp.fully_shard`) on each block of the model and on the root.

Every rank holds 1/N of each parameter, gradient and optimizer state (ZeRO-3): a block's parameters
are all-gathered just before its forward (and again before its backward when resharded after
forward), and its gradients are reduce-scattered inside backward, so `sync_gradients()` has nothing
left to do. Parameters are DTensors; `full_state_dict` gathers them under the unwrapped names.

With param_dtype=bf16, each BatchNorm module is sharded first, on its own, with a policy that computes it
in fp32 (its running statistics are fp32 buffers, which FSDP does not cast, and BatchNorm refuses a
bf16 input against them) and hands its output on in bf16; FSDP2 takes a policy per module. It costs
one more (small) all-gather and reduce-scatter per BatchNorm module.

Which modules are blocks is the workload's knowledge (`Workload.blocks`, which the harness leaves
on the model it builds); for a model whose workload does not say, `harness.blocks.model_blocks`
guesses from its shape (the step model's gradient profile records the same blocks).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import re
from collections.abc import Iterator
from typing import ClassVar, Literal

from harness.blocks import has_parameters, model_blocks, shared_parameters
from harness.comm_timeline import CommTimeline
from harness.protocols import ConfigError, StrategyDefaults, lazy_module, option
from impls import register
from impls._support import fsdp_timing
from impls._support.common import broadcast_module_state, collective_backend

torch = lazy_module("torch")
nn = lazy_module("torch.nn")

DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
"""Each option's torch dtype, by its name in torch (looked up where a strategy wraps: torch is imported lazily)."""


ALL_GATHERS_BLOCK = (
    "measured, hidden share a lower bound: each all-gather counts as holding compute up from its launch, one "
    "FSDP prefetched included (FSDP2 has no hook where compute waits for it: impls/_support/fsdp_timing.py)"
)
"""The `comm_note` of an fsdp row on a GPU: its exposed communication reads high, its hidden share low."""


FULLY_SHARD_PUBLIC = (2, 6)
"""The torch release whose torch.distributed.fsdp exports fully_shard (pytorch's PR 141868)."""


def torch_release() -> tuple[int, ...]:
    """(major, minor) of the installed torch: its dist-info's, read without importing torch (list and compare import
    none); a torch without one (a source build run in place) has only torch.__version__, which imports it."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        version = str(torch.__version__)
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


class _Fp16RefusedBeforeTorch25:
    """FSDP's `fp16_refused`, read at first use, not when the class is defined: every command that lists the
    strategies defines it, and one whose torch could not be read would fail them all."""

    def __get__(self, instance: object, owner: type | None = None) -> str:
        if torch_release() >= (2, 5):
            return ""
        return (
            "torch < 2.5's grad scaler checks each rank's gradient shards apart: its ranks could skip different steps"
        )


@register("fsdp", description="FSDP2 fully_shard per block and root (parameters, gradients, optimizer state sharded)")
@dataclasses.dataclass(kw_only=True)
class FSDP(StrategyDefaults):
    gradient_traffic: ClassVar[str] = "sharded"  # reduce-scatter, and all-gathers of the parameters
    shards_state: ClassVar[bool] = True  # parameters, gradients and optimizer state
    # fp16's grad scaler checks each rank's DTensor shards for infs; torch 2.5 all-reduces that check (its PR 132816)
    fp16_refused: ClassVar[str] = _Fp16RefusedBeforeTorch25()  # type: ignore[assignment]
    reshard_after_forward: bool = option(
        True,
        "Free each block's gathered parameters after its forward and gather them again for backward (less"
        " memory, one more all-gather per block); false keeps them until backward (ZeRO-2-like).",
    )
    param_dtype: Literal["fp32", "bf16"] = option(
        "fp32",
        "Dtype the gathered parameters are computed in (mixed precision; sharded masters stay fp32). CUDA only.",
    )
    reduce_dtype: Literal["fp32", "bf16"] = option("fp32", "Dtype gradients are reduce-scattered in. CUDA only.")

    _model: nn.Module | None = dataclasses.field(default=None, init=False, repr=False)
    _timeline: CommTimeline | None = dataclasses.field(default=None, init=False, repr=False)

    @property
    def mixed_precision(self) -> bool:
        return (self.param_dtype, self.reduce_dtype) != ("fp32", "fp32")

    def unavailable_reason(self, *, device: str, world_size: int) -> str | None:
        if torch_release() < FULLY_SHARD_PUBLIC:  # before, FSDP2 was torch.distributed._composable.fsdp
            return "needs torch.distributed.fsdp.fully_shard (FSDP2's public API, torch ≥ 2.6); this torch is older"
        if self.mixed_precision and device != "cuda":
            return "FSDP mixed precision (param_dtype/reduce_dtype bf16) is offered on CUDA only"
        return None

    def wrap(self, model: nn.Module) -> nn.Module:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if self.mixed_precision and next(model.parameters()).device.type != "cuda":
            raise ConfigError("fsdp: param_dtype/reduce_dtype bf16 need CUDA; use fp32 on the CPU")
        # fully_shard keeps each rank's own slice of its own weights: make rank 0's the only weights first.
        broadcast_module_state(model)
        sharded = [fully_shard(module, **options) for module, options in self.shard_plan(model, MixedPrecisionPolicy)]
        self._model = sharded[-1]
        if self._timeline is not None:
            fsdp_timing.time_collectives(sharded, self._timeline)
        return self._model

    def shard_plan(self, model: nn.Module, policy_cls: type) -> list[tuple[nn.Module, dict]]:
        """The fully_shard calls of `wrap`, in order, each (module, keyword arguments): inner before
        outer, as FSDP2 requires. BatchNorm modules first when parameters are gathered in bf16 (fp32
        compute, output in bf16), then the blocks, then the root, which takes what no block holds
        (embeddings, heads, tied weights); its parameters are gathered at the start of forward and,
        being needed again first in backward, kept until then."""
        param_dtype, reduce_dtype = getattr(torch, DTYPES[self.param_dtype]), getattr(torch, DTYPES[self.reduce_dtype])
        # fp32 parameters are left uncast (None), not cast to fp32: given a param_dtype FSDP2 also casts each unit's
        # forward input to it, and under autocast a block's bf16 input made fp32 sums its gradient's uses in fp32,
        # where one process rounds each to bf16 first: 2.8e-3 off the reference in convnext_tiny under AdamW.
        computed = None if param_dtype == torch.float32 else param_dtype
        options = {
            "reshard_after_forward": self.reshard_after_forward,
            "mp_policy": policy_cls(param_dtype=computed, reduce_dtype=reduce_dtype),
        }
        plan = []
        if param_dtype != torch.float32:
            fp32 = {
                "reshard_after_forward": self.reshard_after_forward,
                "mp_policy": policy_cls(param_dtype=torch.float32, reduce_dtype=reduce_dtype, output_dtype=param_dtype),
            }
            plan += [(module, fp32) for module in batch_norms(model)]
        planned = {id(module) for module, _ in plan}
        plan += [(block, options) for block in model_blocks(model) if id(block) not in planned]
        # Left unsaid for the root, FSDP keeps its parameters from forward to backward, which begins by needing
        # them; said explicitly (newer torch honours it), they would be gathered again for backward.
        root = {key: value for key, value in options.items() if key != "reshard_after_forward"}
        return [*plan, (model, root)]

    def attach_timeline(self, timeline: CommTimeline) -> bool:
        if not fsdp_timing.available():
            return False  # torch < 2.8: FSDP2 has no custom collectives to time them through
        self._timeline = timeline
        return True

    def timeline_caveat(self, device: str) -> str | None:
        return ALL_GATHERS_BLOCK if device == "cuda" else None  # on the CPU each is a blocking call: exact

    def sync_gradients(self) -> None:
        pass  # FSDP already reduce-scattered every block's gradients inside backward

    def no_sync(self) -> contextlib.AbstractContextManager:
        return _without_gradient_sync(self._model)

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Every parameter and buffer in full, under the unwrapped model's names. A collective: call on every rank."""
        from torch.distributed.tensor import DTensor

        state = model.state_dict()
        on_host = collective_backend("cuda") == "gloo" and any(t.is_cuda for t in state.values())
        gather = gathered_on_host if on_host else DTensor.full_tensor
        return {name: gather(tensor) if isinstance(tensor, DTensor) else tensor for name, tensor in state.items()}

    @property
    def parity_exact(self) -> bool:
        return not self.mixed_precision  # bf16 compute or reduction cannot reproduce fp32

    @property
    def parity_inexact_why(self) -> str:
        return (f"param_dtype={self.param_dtype}, reduce_dtype={self.reduce_dtype}: bf16 compute or reduction cannot "
                "reproduce fp32")  # fmt: skip


def gathered_on_host(tensor) -> torch.Tensor:
    """A dim-0-sharded DTensor in full, gathered through host memory: with gloo on GPUs, DTensor's own
    gather (functional collectives on CUDA tensors) crashed the process on an H200 (SIGSEGV, torch
    2.11), so each rank's shard travels as a CPU tensor (shards may differ in size) and the whole
    comes back to the shard's device."""
    import torch.distributed as dist
    from torch.distributed.tensor import Shard

    if [p for p in tensor.placements if not (isinstance(p, Shard) and p.dim == 0)]:
        return tensor.full_tensor()  # not FSDP's one dim-0 shard: DTensor's own gather
    local = tensor.to_local()
    shards: list = [None] * dist.get_world_size()
    dist.all_gather_object(shards, local.detach().cpu())
    return torch.cat(shards, dim=0).to(local.device)


@contextlib.contextmanager
def _without_gradient_sync(model) -> Iterator[None]:
    """Accumulate unsharded gradients locally (FSDP2's no_sync); the next synced backward reduces them all."""
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def batch_norms(model: nn.Module) -> list[nn.Module]:
    """BatchNorm modules (1d, 2d, 3d, sync) with parameters, that no other module shares a parameter with."""
    shared = shared_parameters(model)
    return [
        module
        for module in model.modules()
        if isinstance(module, nn.modules.batchnorm._BatchNorm)
        and has_parameters(module)
        and not any(id(p) in shared for p in module.parameters())
    ]
