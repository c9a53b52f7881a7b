"""`stock`: torch.nn.parallel.DistributedDataParallel with the knobs people tune.

DDP exactly as torch builds it with the options the user gave and no others: without
`bucket_cap_mb` it is DDP's default (first bucket 1 MiB, then 25 MiB, on torch ≥ 2.9; an explicit
cap caps the first bucket too). `layout()` reports what DDP really used: the caps and the buckets
after its rebuild in the order gradients became ready.

DDP reduces gradients inside backward (its C++ reducer launches each bucket's all-reduce as
soon as the bucket is full), so `sync_gradients()` has nothing left to do. To time those
all-reduces, the bucket timeline registers a communication hook that does what DDP's built-in
all-reduce does (divide by the world size, all-reduce the bucket) and stamps its launch and
completion; a compression hook is wrapped the same way, and its row says what travelled: the
fp16/bf16 hooks all-reduce half the bucket's bytes; PowerSGD's chain for one bucket (the all-reduce of
the tensors it leaves uncompressed, then of P, then of Q) is one row of kind `powersgd`, with the
bytes of those three, from its launch to the end of the chain (before its first compressed step it is
a plain `all_reduce` of the bucket). DDP waits on the future the timed hook returns, which completes
only after the stamp.

PowerSGD is offered on NCCL only: torch's powerSGD_hook waits for its next all-reduce inside the
callback of the previous one, which on gloo runs on one of gloo's worker threads, so with two or more
buckets the ranks issue those all-reduces in different orders and the run hangs or aborts
(`gloo::EnforceNotMet`). Such a configuration is `skipped` with that reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from harness.bucketing import MIB
from harness.comm_timeline import BUFFERS, CommTimeline
from harness.protocols import ConfigError, StrategyDefaults, lazy_module, option
from impls import register
from impls._support.common import DDP_WARMUP, collective_backend, nbytes

torch = lazy_module("torch")
dist = lazy_module("torch.distributed")
nn = lazy_module("torch.nn")

if TYPE_CHECKING:  # annotations only
    from torch.nn.parallel import DistributedDataParallel


@dataclasses.dataclass(kw_only=True)
class DDPOptions:
    """DDP's own knobs, shared by every strategy built on DDP (stock, zero): fields and docs inherited."""

    warmup_needed: ClassVar[dict[str, int]] = DDP_WARMUP
    model_needs: ClassVar[tuple[str, ...]] = ("find_unused_parameters",)  # DDP refuses a model with unused ones

    bucket_cap_mb: float | None = option(
        None,
        "Bucket cap of DDP in MiB; unset: DDP's default (25 MiB, and a first bucket of 1 MiB on torch ≥ 2.9, "
        "which an explicit cap replaces).",
        valid="MiB > 0",
        above=0,
    )
    broadcast_buffers: bool = option(
        True,
        "Broadcast rank 0's buffers (e.g. BatchNorm statistics) before each forward that follows one with"
        " gradients enabled outside no_sync (and before the first).",
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

    def ddp_options(self) -> dict[str, Any]:
        """These options by name, to build a `Stock` (the DDP underneath) from a strategy that shares them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(DDPOptions)}

    def ddp_arguments(self) -> dict[str, Any]:
        """What to pass DDP: the options that differ from DDP's own defaults, and only those (newer
        torch warns about some when passed at all, and an explicit bucket_cap_mb changes the layout)."""
        given = self.ddp_options()
        return {name: value for name, value in given.items() if value != DDP_DEFAULTS[name]}

    @property
    def zero_grad_set_to_none(self) -> bool:
        return not self.gradient_as_bucket_view  # the gradients are the buckets: zero them in place

    def timeline_cost(self) -> str | None:
        hook = self._hook_name()
        return TIMED_HOOK_COST if hook == "none" else WRAPPED_HOOK_COST.format(hook=hook)

    def timeline_caveat(self, device: str) -> str | None:
        hook = self._hook_name()
        return CASTS_IN_FLIGHT.format(hook=hook) if hook in ("fp16", "bf16") else None

    def _hook_name(self) -> str:
        """The compression hook, where the strategy has the option (stock); ZeRO's DDP runs none."""
        return getattr(self, "comm_hook", "none")


TIMED_HOOK_COST = (
    "timing DDP's buckets replaces its fused C++ all-reduce with a Python communication hook (an extra pass over "
    "every bucket: 1-6 % of a CPU step in benchmarks/strategies.py, 6-12 % on gpt2/small in benchmarks/hook_cost.py)"
)

WRAPPED_HOOK_COST = (
    "timing DDP's buckets wraps the {hook} hook, a Python communication hook DDP runs anyway, in a stamp at each "
    "bucket's call and a callback on its future (no pass over the bucket: not measured apart)"
)
"""A compression hook already replaces DDP's fused C++ all-reduce (timed or not): what timing adds is timed_hook's
wrapper around torch's hook, a few Python calls a bucket."""

CASTS_IN_FLIGHT = (
    "the {hook} hook's casts counted in flight: a bucket's time runs from before the hook casts it to 2-byte floats "
    "to after it copies the sum back into the bucket, so comm_ms holds those passes over the bucket, compute, and can "
    "read longer than stock's though half the bytes travel"
)
"""torch's fp16/bf16_compress_hook casts inside the hook and copies back in its future's callback: the timed wrapper
stamps the hook's call and its future, so the casts are inside the window (the console's `casts_counted` words).
Written into every such row's `comm_note`, so no figure of one machine's: on one CPU thread at load 18, 32.1 MiB
(mlp/small's gradients) were cast and divided in 97 ms and copied back in 17 ms."""


DDP_DEFAULTS = {
    "bucket_cap_mb": None,
    "broadcast_buffers": True,
    "find_unused_parameters": False,
    "gradient_as_bucket_view": False,
    "static_graph": False,
}
"""DistributedDataParallel's defaults for the options above (torch 2.4 to 2.14 alike)."""


@register("stock", description="torch DistributedDataParallel (bucketed all-reduce overlapped with backward)")
@dataclasses.dataclass(kw_only=True)
class Stock(DDPOptions, StrategyDefaults):
    reference: ClassVar[bool] = True  # the strategy every other is measured against
    gradient_traffic: ClassVar[str] = "allreduce"  # a compression hook sends less: the rows say which
    keeps_buckets: ClassVar[bool] = True  # DDP's buckets (the gradients themselves with gradient_as_bucket_view)

    comm_hook: Literal["none", "fp16", "bf16", "powersgd"] = option(
        "none",
        "Gradient compression hook from torch.distributed.algorithms.ddp_comm_hooks: fp16/bf16 all-reduce each "
        "bucket as 2-byte floats (half the bytes, lossy); powersgd a low-rank approximation (powersgd_rank), NCCL "
        "only (skipped on gloo).",
    )
    powersgd_rank: int = option(1, "Matrix approximation rank of the PowerSGD hook.", valid="≥ 1")

    _ddp: DistributedDataParallel | None = dataclasses.field(default=None, init=False, repr=False)
    _timeline: CommTimeline | None = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.powersgd_rank < 1:
            raise ConfigError(f"option powersgd_rank={self.powersgd_rank} is not valid; give a whole number ≥ 1")

    @classmethod
    def inert_options(cls, options: dict[str, Any]) -> dict[str, str]:
        if "powersgd_rank" in options and options.get("comm_hook", "none") != "powersgd":
            return {"powersgd_rank": "applies only with comm_hook=powersgd"}  # no hook reads it
        return {}

    def attach_timeline(self, timeline: CommTimeline) -> bool:
        self._timeline = timeline
        return True

    def unavailable_reason(self, *, device: str, world_size: int) -> str | None:
        if self.comm_hook == "powersgd" and collective_backend(device) == "gloo":
            return POWERSGD_ON_GLOO
        return None

    def wrap(self, model: nn.Module) -> nn.Module:
        device = next(model.parameters()).device
        self._ddp = nn.parallel.DistributedDataParallel(
            model, device_ids=[device] if device.type == "cuda" else None, **self.ddp_arguments()
        )
        hook = self._comm_hook()
        if self._timeline is not None:
            hook = timed_hook(hook, self._timeline, comm_hook=self.comm_hook)
            time_buffer_sync(self._ddp, self._timeline)
        if hook is not None:
            self._ddp.register_comm_hook(*hook)
        return self._ddp

    def _comm_hook(self) -> tuple[Any, Callable] | None:
        """(state, hook) of the chosen compression, or None for DDP's built-in all-reduce."""
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

        if self.comm_hook == "fp16":
            return None, default_hooks.fp16_compress_hook
        if self.comm_hook == "bf16":
            return None, default_hooks.bf16_compress_hook
        if self.comm_hook == "powersgd":
            # start_powerSGD_iter=2: compress from the first step after DDP's bucket rebuild,
            # so that the measured steps really are compressed (the default waits 1000 steps).
            state = powersgd.PowerSGDState(
                process_group=None,
                matrix_approximation_rank=self.powersgd_rank,
                start_powerSGD_iter=2,
            )
            return state, powersgd.powerSGD_hook
        return None

    def sync_gradients(self) -> None:
        pass  # DDP already reduced every bucket inside backward

    def no_sync(self):
        return self._ddp.no_sync()

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return self._ddp.module.state_dict()

    def layout(self) -> dict[str, Any] | None:
        return None if self._ddp is None else ddp_layout(self._ddp)

    @property
    def parity_exact(self) -> bool:
        return self.comm_hook == "none"  # compression hooks are lossy by design

    @property
    def parity_inexact_why(self) -> str:
        return f"comm_hook={self.comm_hook} compresses gradients (lossy by design)"


def ddp_layout(ddp: DistributedDataParallel) -> dict[str, Any]:
    """The caps DDP uses and its buckets as they are now (after its rebuild, once it has run two
    steps): sizes in MiB in launch order, and each bucket's parameter indices."""
    cap = ddp.bucket_bytes_cap
    config = getattr(ddp, "_bucket_config", None)  # torch ≥ 2.9
    first = config.first_bucket_bytes_cap if config is not None else min(dist._DEFAULT_FIRST_BUCKET_BYTES, cap)
    layout: dict[str, Any] = {"bucket_cap_mb": cap / MIB, "first_bucket_cap_mb": first / MIB}
    try:  # the reducer's live buckets; the logger's copy lags a step behind the rebuild
        buckets = ddp.reducer._get_zeros_like_grad_buckets()
    except (AttributeError, RuntimeError):
        return layout
    layout["bucket_sizes_mb"] = [round(nbytes(b.buffer()) / MIB, 6) for b in buckets]
    position = {id(p): i for i, p in enumerate(p for p in ddp.module.parameters() if p.requires_grad)}
    layout["bucket_params"] = [[position[id(p)] for p in b.parameters()] for b in buckets]
    return layout


POWERSGD_ON_GLOO = (
    "comm_hook=powersgd needs NCCL: on gloo, torch's powerSGD_hook issues its follow-up all-reduces from gloo's "
    "worker threads in a different order on each rank (hangs or aborts with 2 or more buckets)"
)


def timed_hook(
    hook: tuple[Any, Callable] | None, timeline: CommTimeline, *, comm_hook: str = "none"
) -> tuple[Any, Callable]:
    """A communication hook that stamps each bucket's launch and completion in `timeline`: `hook`
    (the compression `comm_hook`) wrapped, or for None what DDP's built-in reduction does (divide the
    bucket by the world size, all-reduce it). DDP calls a hook the moment a bucket is ready and
    waits on the future it returns: that future completes after the stamp."""
    if hook is not None:
        state, inner = hook

        def timed(state, bucket):  # unannotated: DDP rejects a hook whose annotation is not the GradBucket class
            sent_before = _powersgd_numel(state)
            entry = timeline.launching(bucket=bucket.index(), nbytes=nbytes(bucket.buffer()))
            future = inner(state, bucket)
            if entry is not None:
                entry.kind, entry.nbytes = hook_traffic(
                    comm_hook, bucket.buffer(), _powersgd_numel(state) - sent_before
                )
            return timeline.completed_through(entry, future)

        return state, timed

    def timed_mean(state, bucket):  # as above
        ready, buffer = timeline.now(), bucket.buffer()
        buffer.div_(dist.get_world_size())
        entry = timeline.launching(bucket=bucket.index(), nbytes=nbytes(buffer), ready=ready)
        future = dist.all_reduce(buffer, async_op=True).get_future()
        timeline.completes(entry, future)  # runs before the callback below, which completes DDP's future
        return future.then(lambda fut: fut.value()[0])

    return None, timed_mean


def hook_traffic(comm_hook: str, buffer: torch.Tensor, powersgd_numel: int) -> tuple[str, int]:
    """(kind, bytes) of what a compression hook sent for one bucket: fp16/bf16 all-reduce the bucket cast
    to 2-byte floats; PowerSGD, once it compresses, sends `powersgd_numel` elements (what it counted as
    its size after compression: the uncompressed tensors plus P and Q) through its chain of all-reduces,
    and before that all-reduces the bucket as it is."""
    if comm_hook in ("fp16", "bf16"):
        return "all_reduce", buffer.numel() * 2
    if comm_hook == "powersgd" and powersgd_numel > 0:
        return "powersgd", powersgd_numel * buffer.element_size()
    return "all_reduce", nbytes(buffer)


def _powersgd_numel(state: Any) -> int:
    """Elements PowerSGD has sent so far, as it counts them (0 for a hook without that count)."""
    return getattr(state, "total_numel_after_compression", 0)


def time_buffer_sync(ddp: DistributedDataParallel, timeline: CommTimeline) -> None:
    """Note DDP's broadcast of its buffers before each forward (with broadcast_buffers) on `timeline`: a
    collective the forward waits for. Through DDP's own `_sync_buffers` (torch ≥ 1.x, a private method:
    where a torch has none, the broadcast stays uncounted, as it was, inside forward)."""
    sync = getattr(ddp, "_sync_buffers", None)
    if sync is None:
        return

    def timed_sync() -> None:
        size = sum(nbytes(b) for b in getattr(ddp, "modules_buffers", []))
        timeline.blocking(sync, bucket=BUFFERS, nbytes=size, kind="broadcast_buffers")

    ddp._sync_buffers = timed_sync
