"""`bucketed`: our own bucketed all-reduce, overlapped with backward (the ideas of DDP's reducer, in Python).

- At wrap, the parameters that require grad are packed in reverse registration order (backward
  roughly produces gradients from the last layer to the first) into buckets by DDP's own rules
  (harness.bucketing, which the step-time model uses too): a bucket closes once it holds
  `bucket_cap_mb` or more, one flat buffer each, never mixing dtypes or devices; the first
  bucket of each dtype has DDP's first-bucket cap unless `first_bucket_mb` sets it. After the
  first step the buckets are packed again in the order gradients became ready (rank 0's), as
  DDP rebuilds its own: with the same options the two have the same buckets, so that a
  comparison of the two compares reducers, not layouts.
- Rank 0's buffers (BatchNorm statistics) are broadcast before a forward exactly when DDP's
  `broadcast_buffers` (its default) would: before the first forward, and before any forward that
  follows one run with gradients enabled outside `no_sync()` (DDP's `require_forward_param_sync`,
  set at the end of each forward). So not after an evaluation under no_grad, nor within a
  gradient accumulation but for its first micro-batch.
- A post-accumulate-grad hook per parameter writes its gradient, divided by the world size,
  into its bucket; when a bucket's last parameter is in, the bucket's all-reduce starts
  asynchronously while backward goes on. Each bucket's readiness, launch and completion go into
  the bucket timeline when the harness attaches one.
- Buckets start strictly in bucket order on every rank. A collective is matched by its
  position in the sequence, so launching in readiness order (which may differ between ranks)
  would pair different buckets and corrupt or hang the run.
- `sync_gradients()` starts what is left (a parameter without a gradient counts as zeros),
  waits, and makes every .grad a view into its reduced bucket: no copy back. As with DDP's
  gradient_as_bucket_view, a .grad kept across steps is overwritten by the next reduction.
- A parameter the loss did not use (no gradient on this rank this step) is refused, as DDP refuses
  it, unless `find_unused_parameters`: then, as DDP with it, the ranks all-reduce which parameters
  had a gradient (one small extra collective a step), and one that had none on any rank keeps
  .grad None, so the optimizer skips it (Adam would move a zero gradient's parameter by its momentum).
- Gradients must be dense (no sparse embeddings), as with the buckets of DDP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator
from typing import Any, ClassVar

from harness.bucketing import DDP_DEFAULT_CAP_MB, MIB, assign_buckets, first_bucket_bytes
from harness.comm_timeline import BUFFERS, UNUSED, CommTimeline
from harness.protocols import StrategyDefaults, lazy_module, no_grad, option
from impls import register
from impls._support.common import (
    broadcast_module_state,
    broadcast_tensors,
    flat_buffer_with_views,
    nbytes,
    point_grads_at_views,
    stage_mean_gradient,
    trainable_parameters,
)

torch = lazy_module("torch")
dist = lazy_module("torch.distributed")
nn = lazy_module("torch.nn")


@dataclasses.dataclass(eq=False, slots=True)
class _Bucket:
    """Parameters whose gradients travel in one all-reduce, and the flat buffer they travel in."""

    indices: list[int]
    """Positions of the parameters in Bucketed._params."""
    params: list[nn.Parameter]
    buffer: torch.Tensor
    views: list[torch.Tensor]
    pending: int
    """Parameters of this step still without their gradient in the buffer."""
    work: dist.Work | None = None
    ready: Any = None
    """When the bucket's last gradient arrived this step (a timeline mark), while a timeline records."""


@dataclasses.dataclass(eq=False, slots=True)
class _Slot:
    """Where one parameter's gradient goes, and the last step in which it arrived."""

    bucket_index: int
    view: torch.Tensor
    ready_step: int = -1


@register("bucketed", description="our own bucketed all-reduce overlapped with backward (DDP's reducer in Python)")
@dataclasses.dataclass(kw_only=True)
class Bucketed(StrategyDefaults):
    gradient_traffic: ClassVar[str] = "allreduce"
    instrument: ClassVar[str] = (
        "ddpbench's measuring instrument beside DDP (to tell its reducer's cost from its buckets'), not a strategy "
        "to deploy"
    )
    keeps_buckets: ClassVar[bool] = True  # one flat buffer a bucket
    bucket_cap_mb: float | None = option(
        None,
        "Bucket cap in MiB: a bucket closes once it holds this much or more (DDP's rule; a gradient is never "
        "split); unset: DDP's default, 25 MiB with DDP's default first bucket.",
        valid="MiB > 0",
        above=0,
    )
    first_bucket_mb: float | None = option(
        None,
        "Cap of the first bucket of each dtype in MiB (small, so communication starts early); unset: "
        "DDP's own first-bucket cap for this bucket cap (harness.bucketing.first_bucket_bytes).",
        valid="MiB > 0",
        above=0,
    )
    rebuild: bool = option(
        True,
        "Re-pack the buckets once, after the first step, in the order gradients became ready (as DDP does).",
    )
    broadcast_buffers: bool = option(
        True,
        "Broadcast rank 0's buffers (e.g. BatchNorm statistics) before a forward when DDP would: before each"
        " forward that follows one with gradients enabled outside no_sync (and before the first).",
    )
    find_unused_parameters: bool = option(
        False,
        "Allow parameters the loss does not use: all-reduce which had a gradient each step and leave .grad None "
        "on those none had (as DDP's option); unset: such a model is refused, as DDP refuses it.",
    )
    model_needs: ClassVar[tuple[str, ...]] = ("find_unused_parameters",)

    _params: list[nn.Parameter] = dataclasses.field(default_factory=list, init=False, repr=False)
    _names: list[str] = dataclasses.field(default_factory=list, init=False, repr=False)
    _buckets: list[_Bucket] = dataclasses.field(default_factory=list, init=False, repr=False)
    _slots: list[_Slot] = dataclasses.field(default_factory=list, init=False, repr=False)
    _next_launch: int = dataclasses.field(default=0, init=False, repr=False)
    """Index of the next bucket to start: buckets start strictly in order."""
    _step: int = dataclasses.field(default=0, init=False, repr=False)
    _world: int = dataclasses.field(default=1, init=False, repr=False)
    _sync_enabled: bool = dataclasses.field(default=True, init=False, repr=False)
    _buffers_due: bool = dataclasses.field(default=True, init=False, repr=False)
    """Whether the next forward broadcasts buffers: DDP's require_forward_param_sync."""
    _readiness: list[int] | None = dataclasses.field(default=None, init=False, repr=False)
    """Parameter indices in the order their gradients arrived, recorded in the first step when rebuilding."""
    _timeline: CommTimeline | None = dataclasses.field(default=None, init=False, repr=False)

    def cap_bytes(self) -> tuple[int, int]:
        """(cap, first bucket's cap) in bytes. The first is never above the cap: DDP uses its smaller
        first bucket only when it is smaller."""
        given = self.bucket_cap_mb is not None
        cap = round((self.bucket_cap_mb if given else DDP_DEFAULT_CAP_MB) * MIB)
        if self.first_bucket_mb is None:
            return cap, first_bucket_bytes(cap, cap_given=given)
        return cap, min(round(self.first_bucket_mb * MIB), cap)

    def attach_timeline(self, timeline: CommTimeline) -> bool:
        self._timeline = timeline
        return True

    def wrap(self, model: nn.Module) -> nn.Module:
        broadcast_module_state(model)
        self._world = dist.get_world_size()
        self._params = trainable_parameters(model)
        names = {id(p): name for name, p in model.named_parameters()}
        self._names = [names[id(p)] for p in self._params]
        self._build_buckets(packing_order=list(reversed(range(len(self._params)))))
        for index, p in enumerate(self._params):
            p.register_post_accumulate_grad_hook(functools.partial(self._on_gradient, index))
        self._readiness = [] if self.rebuild else None
        buffers = [b for b in model.buffers() if b.numel()]
        if self.broadcast_buffers and buffers:
            model.register_forward_pre_hook(lambda module, args: self._broadcast_if_due(buffers))
            model.register_forward_hook(lambda module, args, output: self._note_forward())
        return model

    def _broadcast_if_due(self, buffers: list[torch.Tensor]) -> None:
        if not self._buffers_due:
            return
        if self._timeline is None:
            broadcast_tensors(buffers)
        else:
            self._timeline.blocking(lambda: broadcast_tensors(buffers), bucket=BUFFERS,
                                    nbytes=sum(nbytes(b) for b in buffers), kind="broadcast_buffers")  # fmt: skip

    def _note_forward(self) -> None:
        """After each forward, as DDP: the next one syncs buffers only if this one will reduce gradients."""
        self._buffers_due = torch.is_grad_enabled() and self._sync_enabled

    def _build_buckets(self, *, packing_order: list[int]) -> None:
        """Buckets over the parameters taken in `packing_order` (indices into self._params)."""
        cap, first_cap = self.cap_bytes()
        groups = assign_buckets(
            [nbytes(p) for p in self._params],
            [(p.dtype, p.device) for p in self._params],
            cap_bytes=cap,
            first_cap_bytes=first_cap,
            order=packing_order,
        )
        slots: dict[int, _Slot] = {}
        self._buckets = []
        for bucket_index, indices in enumerate(groups):
            params = [self._params[i] for i in indices]
            buffer, views = flat_buffer_with_views(params)
            self._buckets.append(_Bucket(indices, params, buffer, views, pending=len(params)))
            slots.update((i, _Slot(bucket_index, view)) for i, view in zip(indices, views, strict=True))
        self._slots = [slots[i] for i in range(len(self._params))]
        self._next_launch = 0

    def _on_gradient(self, index: int, param: nn.Parameter) -> None:
        """Runs inside backward, once the gradient of self._params[index] is fully accumulated."""
        if not self._sync_enabled:
            return  # inside no_sync(): the gradient stays in .grad and accumulates
        slot = self._slots[index]
        if slot.ready_step == self._step:
            raise RuntimeError(
                f"parameter {self._names[index]} got a second gradient before sync_gradients(); "
                "accumulate inside no_sync() and call sync_gradients() after every synchronised backward"
            )
        slot.ready_step = self._step
        if self._readiness is not None:
            self._readiness.append(index)
        stage_mean_gradient(param, slot.view, self._world)
        bucket = self._buckets[slot.bucket_index]
        bucket.pending -= 1
        if bucket.pending == 0:
            if self._timeline is not None:
                bucket.ready = self._timeline.now()
            if slot.bucket_index == self._next_launch:
                self._launch_ready_buckets()

    def _launch_ready_buckets(self) -> None:
        """Start every complete bucket from the next one in order; stop at the first incomplete one."""
        buckets = self._buckets
        while self._next_launch < len(buckets) and buckets[self._next_launch].pending == 0:
            bucket = buckets[self._next_launch]
            if self._timeline is None:
                bucket.work = dist.all_reduce(bucket.buffer, async_op=True)
            else:
                entry = self._timeline.launching(
                    bucket=self._next_launch, nbytes=nbytes(bucket.buffer), ready=bucket.ready
                )
                bucket.work = dist.all_reduce(bucket.buffer, async_op=True)
                self._timeline.completes(entry, bucket.work.get_future())
            bucket.ready = None
            self._next_launch += 1

    @no_grad
    def sync_gradients(self) -> None:
        pairs = zip(self._slots, self._params, strict=True)
        used_here = [slot.ready_step == self._step or p.grad is not None for slot, p in pairs]  # or left by no_sync
        self._stage_missing_gradients()
        self._launch_ready_buckets()
        used = self._used_on_any_rank(used_here)  # after every bucket: collectives pair up in launch order
        for bucket in self._buckets:
            bucket.work.wait()
            bucket.work = None
            bucket.pending = len(bucket.params)
            point_grads_at_views(bucket.params, bucket.views)
            for i, p in zip(bucket.indices, bucket.params, strict=True):
                if not used[i]:
                    p.grad = None  # as DDP's find_unused_parameters: no gradient anywhere, no optimizer step
        self._next_launch = 0
        self._step += 1
        if self._readiness is not None:  # the first step has shown the order gradients arrive in
            readiness, self._readiness = self._readiness, None
            self._rebuild_in_readiness_order(readiness)

    def _used_on_any_rank(self, used_here: list[bool]) -> list[bool]:
        """Which parameters had a gradient on some rank this step. Without find_unused_parameters every one
        must have had one here (no collective is spent asking the others); a missing one is refused, as by DDP."""
        if not self.find_unused_parameters:
            unused = [name for name, had in zip(self._names, used_here, strict=True) if not had]
            if unused:
                shown = ", ".join(unused[:3]) + (f" and {len(unused) - 3} more" if len(unused) > 3 else "")
                raise RuntimeError(
                    f"bucketed: the loss did not use some of the model's parameters ({shown}); "
                    "--opt find_unused_parameters=true lets bucketed run such a model, as it lets DDP"
                )
            return used_here
        mask = torch.tensor(used_here, dtype=torch.int32, device=self._params[0].device)
        if self._timeline is None:
            dist.all_reduce(mask)
        else:  # timed as the buckets are: untimed, its wait read as the strategy's own work, not communication
            self._timeline.blocking(
                lambda: dist.all_reduce(mask), bucket=UNUSED, nbytes=nbytes(mask), kind="unused_mask"
            )
        return [bool(n) for n in mask.tolist()]

    def _stage_missing_gradients(self) -> None:
        """Parameters whose hook did not fire this step: a gradient left from no_sync, or zeros."""
        for bucket in self._buckets[self._next_launch :]:
            if bucket.pending == 0:
                continue
            for i, p, view in zip(bucket.indices, bucket.params, bucket.views, strict=True):
                if self._slots[i].ready_step != self._step:
                    stage_mean_gradient(p, view, self._world)
            bucket.pending = 0
            if self._timeline is not None:
                bucket.ready = self._timeline.now()

    def _rebuild_in_readiness_order(self, readiness: list[int]) -> None:
        """Re-pack once, in rank 0's readiness order: every rank must build the same buckets."""
        seen = set(readiness)
        order = readiness + [i for i in reversed(range(len(self._params))) if i not in seen]
        shared = [order]
        dist.broadcast_object_list(shared, src=0)
        self._build_buckets(packing_order=shared[0])

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside only accumulate into .grad; the next one outside reduces the sum."""
        previous, self._sync_enabled = self._sync_enabled, False
        try:
            yield
        finally:
            self._sync_enabled = previous

    def layout(self) -> dict[str, Any] | None:
        if not self._buckets:
            return None
        cap, first_cap = self.cap_bytes()
        return {
            "bucket_cap_mb": cap / MIB,
            "first_bucket_cap_mb": first_cap / MIB,
            "bucket_sizes_mb": [round(nbytes(b.buffer) / MIB, 6) for b in self._buckets],
            "bucket_params": [list(b.indices) for b in self._buckets],
        }

    def bucket_members(self) -> list[list[str]]:
        """The parameter names in each bucket, in launch order (for tests and for people reading a layout)."""
        return [[self._names[i] for i in bucket.indices] for bucket in self._buckets]
