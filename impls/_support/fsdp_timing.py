"""FSDP2's collectives in the bucket timeline. Private (its folder's leading underscore): not a plug-in.

FSDP2 lets a sharded module replace its all-gather and reduce-scatter (`set_custom_all_gather`,
`set_custom_reduce_scatter`, torch ≥ 2.8). The replacements here do exactly what FSDP's defaults
do and stamp each call's launch and completion: a block's all-gather before its forward (and
again before its backward when it resharded), its gradients' reduce-scatter in backward. On a GPU
FSDP issues them on its own streams, and the stamps are CUDA events on those streams. Where the
installed torch lacks the hooks, nothing is timed and the strategy says so.

Which of them hold compute up (`blocking`, which the overlap analysis takes out of compute): on the
CPU every one, a blocking call on the only thread. On a GPU the all-gathers: FSDP makes the compute
stream wait for each one's event before the block's forward or backward
(`foreach_all_gather_copy_out`: `current_stream().wait_event(all_gather_event)`). The exact wait is
from the moment the compute stream reaches that point to the gather's end, but FSDP2 offers no hook
at that point in backward, so the whole all-gather, from its launch on FSDP's all-gather stream, is
stamped blocking: this overstates the exposed time of an all-gather FSDP prefetched while the previous
block still computed (it understated all of them before). The reduce-scatters run on FSDP's own
stream and the compute stream waits for them only once, at the end of backward: not blocking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.comm_timeline import CommTimeline
from impls._support.common import nbytes

if TYPE_CHECKING:  # annotations only: listing the strategies imports no torch (2 to 12 s)
    from torch import nn


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
            work = super().__call__(output_tensor, input_tensor, group, async_op)
            return _stamped(timeline, entry, work, blocks_compute=True)

    class TimedReduceScatter(reduce_scatter):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            entry = timeline.launching(bucket=self.index, nbytes=nbytes(input_tensor), kind="reduce_scatter")
            work = super().__call__(output_tensor, input_tensor, group, op, async_op)
            return _stamped(timeline, entry, work, blocks_compute=not timeline.on_gpu)

    for index, module in enumerate(modules):
        module.set_custom_all_gather(TimedAllGather(index))
        module.set_custom_reduce_scatter(TimedReduceScatter(index))


def _stamped(timeline: CommTimeline, entry, work: Any, *, blocks_compute: bool):
    """Completion: through the work's future when it runs on; now when the call was blocking (on a
    GPU: an event on FSDP's stream, where the call was queued), holding compute up or not (see above)."""
    if work is not None:
        timeline.completes(entry, work.get_future())
    else:
        timeline.finished(entry, blocks_compute=blocks_compute)
    return work
