"""`flat`: after backward, every gradient in one flat buffer per dtype and device, all-reduced once.

Fusion without overlap: one large collective instead of one per parameter (so per-message
latency is paid once), but it starts only after backward has finished, so none of it hides
behind compute. The buffers are allocated once, at wrap, and after the all-reduce each .grad
becomes a view into its buffer, so a step costs one copy in (fused with the division by the
world size) and no copy back.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from harness.bucketing import MIB
from harness.comm_timeline import CommTimeline
from harness.protocols import StrategyDefaults, lazy_module, no_grad
from impls import register
from impls._support.common import (
    broadcast_module_state,
    flat_buffer_with_views,
    group_by_dtype_and_device,
    nbytes,
    point_grads_at_views,
    stage_mean_gradient,
    trainable_parameters,
)

torch = lazy_module("torch")
dist = lazy_module("torch.distributed")
nn = lazy_module("torch.nn")


@dataclasses.dataclass(eq=False)
class _FlatGroup:
    """The parameters of one dtype and device, and the one buffer their gradients travel in."""

    params: list[nn.Parameter]
    buffer: torch.Tensor
    views: list[torch.Tensor]


@register("flat", description="one all-reduce of all gradients flattened, after backward (fusion, no overlap)")
@dataclasses.dataclass(kw_only=True)
class Flat(StrategyDefaults):
    gradient_traffic: ClassVar[str] = "allreduce"
    comm_after_backward: ClassVar[bool] = True
    instrument: ClassVar[str] = "ddpbench's measuring instrument (what overlap saves), not a strategy to deploy"
    keeps_buckets: ClassVar[bool] = True  # one flat buffer a dtype and device
    _groups: list[_FlatGroup] = dataclasses.field(default_factory=list, init=False, repr=False)
    _timeline: CommTimeline | None = dataclasses.field(default=None, init=False, repr=False)

    def attach_timeline(self, timeline: CommTimeline) -> bool:
        self._timeline = timeline
        return True

    def wrap(self, model: nn.Module) -> nn.Module:
        broadcast_module_state(model)
        self._groups = [
            _FlatGroup(params, *flat_buffer_with_views(params))
            for params in group_by_dtype_and_device(trainable_parameters(model)).values()
        ]
        return model

    def layout(self) -> dict[str, Any] | None:
        """Its flat buffers as its buckets (one a dtype and device): kept beside the gradients, which backward
        writes anew each step and the sync copies in."""
        return {"bucket_sizes_mb": [round(nbytes(g.buffer) / MIB, 6) for g in self._groups]} if self._groups else None

    @no_grad
    def sync_gradients(self) -> None:
        world = dist.get_world_size()
        timeline = self._timeline
        for index, group in enumerate(self._groups):
            for p, view in zip(group.params, group.views, strict=True):
                stage_mean_gradient(p, view, world)
            entry = timeline.launching(bucket=index, nbytes=nbytes(group.buffer)) if timeline else None
            dist.all_reduce(group.buffer)
            if timeline:
                timeline.finished(entry)
            point_grads_at_views(group.params, group.views)
