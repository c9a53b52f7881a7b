"""FSDP2's collectives in the bucket timeline. Private (leading underscore): not a plug-in.

FSDP2 lets a sharded module replace its all-gather and reduce-scatter (`set_custom_all_gather`,
`set_custom_reduce_scatter`, torch ≥ 2.8). The replacements here do exactly what FSDP's defaults
do and stamp each call's launch and completion: a block's all-gather before its forward (and
again before its backward when it resharded), its gradients' reduce-scatter in backward. On a GPU
FSDP issues them on its own streams, and the stamps are CUDA events on those streams. Where the
installed torch lacks the hooks, nothing is timed and the strategy says so.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from harness.comm_timeline import CommTimeline
from impls._common import nbytes


def _defaults() -> tuple[type, type] | None:
    try:
        from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter
    except ImportError:
        return None
    return DefaultAllGather, DefaultReduceScatter


def available() -> bool:
    """Whether this torch's FSDP2 takes custom collectives (torch ≥ 2.8)."""
    from torch.distributed.fsdp import FSDPModule

    return _defaults() is not None and hasattr(FSDPModule, "set_custom_all_gather")


def time_collectives(modules: list[nn.Module], timeline: CommTimeline) -> None:
    """Stamp every all-gather and reduce-scatter of these fully_shard-ed modules; the i-th module's
    collectives are "bucket" i (its parameter group, in the order the modules were sharded)."""
    all_gather, reduce_scatter = _defaults()

    class TimedAllGather(all_gather):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

        def __call__(self, output_tensor, input_tensor, group, async_op=False):
            entry = timeline.launching(bucket=self.index, nbytes=nbytes(output_tensor), kind="all_gather")
            return _stamped(timeline, entry, super().__call__(output_tensor, input_tensor, group, async_op))

    class TimedReduceScatter(reduce_scatter):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            entry = timeline.launching(bucket=self.index, nbytes=nbytes(input_tensor), kind="reduce_scatter")
            return _stamped(timeline, entry, super().__call__(output_tensor, input_tensor, group, op, async_op))

    for index, module in enumerate(modules):
        module.set_custom_all_gather(TimedAllGather(index))
        module.set_custom_reduce_scatter(TimedReduceScatter(index))


def _stamped(timeline: CommTimeline, entry, work: Any):
    """Completion: through the work's future when it runs on; now when the call was blocking. A
    blocking call held up the CPU's only thread (no compute meanwhile); on a GPU it was queued on
    FSDP's own communication stream, and compute streams went on."""
    if work is not None:
        timeline.completes(entry, work.get_future())
    else:
        timeline.finished(entry, blocks_compute=not timeline.on_gpu)
    return work
