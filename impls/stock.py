"""`stock`: torch.nn.parallel.DistributedDataParallel with the knobs people tune.

DDP reduces gradients inside backward (its C++ reducer launches each bucket's all-reduce as
soon as the bucket is full), so `sync_gradients()` has nothing left to do.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from harness.protocols import ConfigError, StrategyDefaults, option
from impls import register

MB = 1024 * 1024


@dataclasses.dataclass(kw_only=True)
class DDPOptions:
    """DDP's own knobs, shared by every strategy built on DDP (stock, zero): fields and docs inherited."""

    bucket_cap_mb: float = option(25.0, "Largest gradient bucket of DDP in MiB (DDP's default is 25).")
    broadcast_buffers: bool = option(
        True, "Broadcast rank 0's buffers (e.g. BatchNorm statistics) before every forward."
    )
    find_unused_parameters: bool = option(
        False, "Walk the autograd graph each step to find parameters that get no gradient."
    )
    gradient_as_bucket_view: bool = option(
        False, "Make .grad a view into DDP's bucket (saves one gradient copy of memory)."
    )
    static_graph: bool = option(
        False, "Promise DDP that the graph and unused parameters never change (enables optimisations)."
    )

    def __post_init__(self) -> None:
        if self.bucket_cap_mb <= 0:
            raise ConfigError(f"option bucket_cap_mb={self.bucket_cap_mb} is not valid; give MiB > 0")

    def ddp_options(self) -> dict[str, Any]:
        """These options by name, to build a `Stock` (the DDP underneath) from a strategy that shares them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(DDPOptions)}


@register("stock", description="torch DistributedDataParallel (bucketed all-reduce overlapped with backward)")
@dataclasses.dataclass(kw_only=True)
class Stock(DDPOptions, StrategyDefaults):
    reference: ClassVar[bool] = True  # the strategy every other is measured against

    comm_hook: Literal["none", "fp16", "bf16", "powersgd"] = option(
        "none", "Gradient compression hook from torch.distributed.algorithms.ddp_comm_hooks."
    )
    powersgd_rank: int = option(1, "Matrix approximation rank of the PowerSGD hook.")

    _ddp: DistributedDataParallel | None = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.powersgd_rank < 1:
            raise ConfigError(f"option powersgd_rank={self.powersgd_rank} is not valid; give a whole number ≥ 1")

    def wrap(self, model: nn.Module) -> nn.Module:
        device = next(model.parameters()).device
        # broadcast_buffers=True is DDP's default; newer torch warns when it is passed at all.
        buffers = {} if self.broadcast_buffers else {"broadcast_buffers": False}
        self._ddp = DistributedDataParallel(
            model,
            device_ids=[device] if device.type == "cuda" else None,
            bucket_cap_mb=self.bucket_cap_mb,
            **buffers,
            find_unused_parameters=self.find_unused_parameters,
            gradient_as_bucket_view=self.gradient_as_bucket_view,
            static_graph=self.static_graph,
        )
        self._register_comm_hook(self._ddp)
        return self._ddp

    def _register_comm_hook(self, ddp: DistributedDataParallel) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

        if self.comm_hook == "fp16":
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif self.comm_hook == "bf16":
            ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        elif self.comm_hook == "powersgd":
            # start_powerSGD_iter=2: compress from the first step after DDP's bucket rebuild,
            # so that the measured steps really are compressed (the default waits 1000 steps).
            state = powersgd.PowerSGDState(
                process_group=None,
                matrix_approximation_rank=self.powersgd_rank,
                start_powerSGD_iter=2,
            )
            ddp.register_comm_hook(state, powersgd.powerSGD_hook)

    def sync_gradients(self) -> None:
        pass  # DDP already reduced every bucket inside backward

    def no_sync(self):
        return self._ddp.no_sync()

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return self._ddp.module.state_dict()

    def layout(self) -> dict[str, Any] | None:
        """DDP's buckets as its logger reports them (sizes in bytes, after the rebuild)."""
        if self._ddp is None:
            return None
        data = self._ddp._get_ddp_logging_data()
        sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
        if isinstance(sizes, str):
            sizes = [int(s) for s in sizes.split(",") if s.strip()]
        return {"bucket_sizes_mb": [round(s / MB, 4) for s in sizes]} if sizes else None

    @property
    def parity_exact(self) -> bool:
        return self.comm_hook == "none"  # compression hooks are lossy by design
