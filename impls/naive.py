"""`naive`: after backward, one blocking all-reduce per parameter gradient, in parameter order.

The textbook version: no fusion (one collective per tensor) and no overlap with backward.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from harness.comm_timeline import CommTimeline
from harness.protocols import StrategyDefaults, lazy_module
from impls import register
from impls._support.common import broadcast_module_state, nbytes, trainable_parameters, zero_missing_grads

dist = lazy_module("torch.distributed")
nn = lazy_module("torch.nn")


@register("naive", description="one blocking all-reduce per parameter after backward (no fusion, no overlap)")
@dataclasses.dataclass(kw_only=True)
class Naive(StrategyDefaults):
    gradient_traffic: ClassVar[str] = "allreduce"
    comm_after_backward: ClassVar[bool] = True
    instrument: ClassVar[str] = (
        "ddpbench's measuring instrument (what fusion and overlap save), not a strategy to deploy"
    )
    _params: list[nn.Parameter] = dataclasses.field(default_factory=list, init=False, repr=False)
    _timeline: CommTimeline | None = dataclasses.field(default=None, init=False, repr=False)

    def attach_timeline(self, timeline: CommTimeline) -> bool:
        self._timeline = timeline
        return True

    def wrap(self, model: nn.Module) -> nn.Module:
        broadcast_module_state(model)
        self._params = trainable_parameters(model)
        return model

    def sync_gradients(self) -> None:
        zero_missing_grads(self._params)
        world = dist.get_world_size()
        timeline = self._timeline
        for index, p in enumerate(self._params):
            entry = timeline.launching(bucket=index, nbytes=nbytes(p.grad)) if timeline else None
            dist.all_reduce(p.grad)
            if timeline:
                timeline.finished(entry)
            p.grad.div_(world)
