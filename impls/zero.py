"""`zero`: DDP plus torch's ZeroRedundancyOptimizer (ZeRO stage 1: optimizer state sharded across ranks).

Gradients are all-reduced by DDP exactly as in `stock`; the optimizer made by `make_optimizer` keeps
state (Adam's moments) only for the parameters this rank owns, steps those, then broadcasts them, so
every rank ends the step with the full, identical parameters while holding ~1/N of the optimizer state.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from harness.comm_timeline import PARAMETERS, CommTimeline
from harness.protocols import ConfigError, StrategyDefaults, lazy_module, option
from impls import register
from impls._support.common import collective_backend, nbytes
from impls.stock import DDPOptions, Stock

torch = lazy_module("torch")
dist = lazy_module("torch.distributed")
nn = lazy_module("torch.nn")


@register("zero", description="DDP + ZeroRedundancyOptimizer (optimizer state sharded across ranks, ZeRO-1)")
@dataclasses.dataclass(kw_only=True)
class Zero(DDPOptions, StrategyDefaults):
    gradient_traffic: ClassVar[str] = "allreduce"  # DDP's, then each rank broadcasts the shard it updated
    shards_state: ClassVar[bool] = True  # the optimizer state
    keeps_buckets: ClassVar[bool] = True  # DDP's
    overlap_with_ddp: bool = option(
        False,
        "Run each rank's optimizer step inside DDP's comm hook, overlapping backward (NCCL only). The first "
        "two steps (three with static_graph) then do not update the parameters (torch's "
        "ZeroRedundancyOptimizer docs), so parity is recorded but not judged; the default warm-up (--warmup 3 "
        "or more: 11 for DDP on CUDA) keeps them all out of the measured steps, a --warmup under 3 measures "
        "steps without an update.",
    )
    parameters_as_bucket_view: bool = option(
        False,
        "Pack each rank's parameters into one flat buffer per device, so the broadcast after the step "
        "is one collective per rank instead of one per parameter. Not with overlap_with_ddp, which "
        "buckets parameters its own way (torch ignores this option there).",
    )

    _stock: Stock = dataclasses.field(init=False, repr=False)
    _zero: torch.optim.Optimizer | None = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.overlap_with_ddp and self.parameters_as_bucket_view:
            raise ConfigError(
                "zero: parameters_as_bucket_view=true has no effect with overlap_with_ddp=true (torch's "
                "ZeroRedundancyOptimizer ignores it and buckets by DDP's buckets); leave one of them false"
            )
        self._stock = Stock(**self.ddp_options())  # the DDP underneath, with the options shared with stock

    def wrap(self, model: nn.Module) -> nn.Module:
        return self._stock.wrap(model)

    def sync_gradients(self) -> None:
        pass  # DDP already reduced every bucket inside backward

    def no_sync(self):
        return self._stock.no_sync()

    def layout(self):
        return self._stock.layout()

    def attach_timeline(self, timeline) -> bool:
        # With overlap_with_ddp, DDP's one communication hook is ZeRO's optimizer step.
        return False if self.overlap_with_ddp else self._stock.attach_timeline(timeline)

    def unavailable_reason(self, *, device: str, world_size: int) -> str | None:
        if self.overlap_with_ddp and collective_backend(device) != "nccl":
            # torch's hook_with_zero_step raises on gloo ("may meet hangs", pytorch issue 62300).
            return "overlap_with_ddp needs NCCL: torch's hook_with_zero_step refuses gloo, which may hang"
        return None

    def make_optimizer(self, params, optimizer_cls, **kwargs) -> torch.optim.Optimizer:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        params = list(params)
        dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in params})
        if len(dtypes) > 1:
            # ZeroRedundancyOptimizer refuses it itself, but only after building half its state.
            raise ConfigError(
                f"zero: ZeroRedundancyOptimizer needs every parameter in one dtype; got {', '.join(dtypes)}"
            )
        self._zero = ZeroRedundancyOptimizer(
            params,
            optimizer_class=optimizer_cls,
            overlap_with_ddp=self.overlap_with_ddp,
            parameters_as_bucket_view=self.parameters_as_bucket_view,
            **kwargs,
        )
        if self.overlap_with_ddp:
            self._hook_optimizer_into_ddp(self._zero)
            return _OverlappedStep(self._zero)
        if self._stock._timeline is not None:
            _time_parameter_sync(self._zero, self._stock._timeline, nbytes=sum(nbytes(p) for p in params))
        return self._zero

    def _hook_optimizer_into_ddp(self, zero) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook import hook_with_zero_step
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        ddp = self._stock._ddp
        if ddp is None:
            raise RuntimeError("zero: call wrap() before make_optimizer(), whose optimizer DDP's hook steps")
        ddp.register_comm_hook(dist.group.WORLD, hook_with_zero_step(allreduce_hook, ddp, zero))

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return self._stock.full_state_dict(model)  # replicated: ZeRO broadcast every owner's shard after the step

    @property
    def parity_exact(self) -> bool:
        # With overlap the first two steps (three with static_graph) only learn DDP's buckets and do
        # not update the parameters.
        return not self.overlap_with_ddp

    @property
    def parity_inexact_why(self) -> str:
        return "overlap_with_ddp=true: its first steps learn DDP's buckets and do not update the parameters"


class _OverlappedStep:
    """The optimizer the training loop sees when ZeRO steps inside backward: `step()` has nothing
    left to do (calling ZeRO's own would log a warning every step); everything else is ZeRO's."""

    def __init__(self, zero: torch.optim.Optimizer) -> None:
        self._zero = zero

    def step(self, closure=None):
        return None

    def __getattr__(self, name: str):
        return getattr(self._zero, name)


def _time_parameter_sync(zero, timeline: CommTimeline, *, nbytes: int) -> None:
    """Note ZeRO's broadcast of every owner's updated parameters at the end of its step on `timeline`: a
    collective the step waits for, else counted as optimizer compute. Through its own `_sync_params` (a
    private method: where a torch has none, the broadcast stays inside the optimizer step, uncounted)."""
    sync = getattr(zero, "_sync_params", None)
    if sync is not None:
        zero._sync_params = lambda: timeline.blocking(
            sync, bucket=PARAMETERS, nbytes=nbytes, kind="broadcast_parameters"
        )
