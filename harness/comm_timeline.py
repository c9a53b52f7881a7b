"""The bucket timeline: when each collective of a step became ready, was launched and was done.

Part of the contract (on harness.clock alone): a strategy records its own collectives here, as it
launches them, and the rank side reads the timeline after the measured steps. Times are marks on
the clock that times the steps (harness.clock), so that they line up with the phases:

- on the CPU, the host's clock; a collective's completion is stamped by a callback on its
  future, which the backend (gloo) runs the moment the work completes;
- on a GPU, CUDA events: the launch on the current stream; the completion recorded on a stream
  that waits for the collective (inside its future's callback, or after a blocking call, whose
  current stream NCCL makes wait). As the clock's rule says, nothing here waits for the device;
  the marks are read once, after the measured window. NCCL records its future's events on its own stream after the
  kernel, so the stamp is exact; gloo on CUDA tensors records them on the compute stream after
  the copy back, so its stamp is when compute could use the result, an upper bound (on one H200,
  33–46 % more communication than the trace shows: docs/measured/gpu-overlap-h200.md).

Only steps opened with `begin_step` are recorded: profiled or replayed steps are not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.clock import Clock, Mark

if TYPE_CHECKING:  # annotations only: listing the strategies imports no torch (2 to 12 s)
    import torch

BUFFERS = -1
"""The bucket index of a broadcast of the model's buffers (DDP's before each forward, and bucketed's)."""
PARAMETERS = -2
"""The bucket index of a broadcast of updated parameters after the optimizer step (ZeRO's)."""
UNUSED = -3
"""The bucket index of the all-reduce of which parameters had a gradient on some rank (bucketed's with
find_unused_parameters, after its buckets; DDP's own runs inside its reducer, untimed)."""


@dataclasses.dataclass(eq=False, slots=True)
class Collective:
    """One collective of one step, as the strategy launched it."""

    step: int
    bucket: int
    """The strategy's index of what travelled (a bucket, a flat group, a parameter), in launch order; BUFFERS
    or PARAMETERS for a broadcast of the model's buffers before forward or of its parameters after the
    optimizer step, UNUSED for the mask of parameters used on some rank."""
    kind: str
    nbytes: int
    ready: Mark
    launched: Mark
    done: Mark | None = None
    blocking: bool = False
    """The issuing thread (CPU) or compute stream (GPU) waited for it: no compute of the step ran meanwhile."""


class CommTimeline:
    """Collects `Collective`s per step. One per configuration and rank."""

    def __init__(self, device: torch.device | None = None) -> None:
        self._clock = Clock(device)
        self._origins: dict[int, Mark] = {}
        self._step: int | None = None
        self._collectives: list[Collective] = []

    # -- the harness: the window
    def begin_step(self, step: int) -> None:
        """Open `step`: times of its collectives are taken from now."""
        self._step = step
        self._origins[step] = self.now()

    def end(self) -> None:
        """Stop recording (after the measured steps)."""
        self._step = None

    # -- the strategy: its collectives
    def now(self) -> Mark:
        return self._clock.mark()

    def launching(
        self, *, bucket: int, nbytes: int, kind: str = "all_reduce", ready: Mark | None = None
    ) -> Collective | None:
        """Note a collective about to be launched (call right before the launch); None outside a step."""
        if self._step is None:
            return None
        launched = self.now()
        entry = Collective(self._step, bucket, kind, nbytes, ready if ready is not None else launched, launched)
        self._collectives.append(entry)
        return entry

    def completes(self, entry: Collective | None, future: torch.futures.Future) -> None:
        """Stamp `entry` done when `future` (the work's `get_future()`) completes. Where a caller
        waits on this very future to go on, hand it `completed_through`'s instead."""
        if entry is not None:
            future.add_done_callback(lambda _: _stamp(entry, self.now()))

    def completed_through(self, entry: Collective | None, future: torch.futures.Future) -> torch.futures.Future:
        """A future with `future`'s value that completes only once `entry` is stamped done: what to
        hand a caller that waits on it (DDP waits on its hook's future), so that the stamp lands
        before the caller goes on. A callback on `future` itself (`completes`) can land late, or not
        at all before the timeline is read: a future wakes its waiters before it runs its callbacks."""
        if entry is None:
            return future

        def stamp_and_pass(done: torch.futures.Future) -> Any:
            _stamp(entry, self.now())
            return done.value()

        return future.then(stamp_and_pass)

    def finished(self, entry: Collective | None, *, blocks_compute: bool = True) -> None:
        """Stamp `entry` done now: a blocking collective has just returned. `blocks_compute`: the
        caller's thread (or, on a GPU, its compute stream) waited for it, as after naive's
        all-reduce; False where the call was queued on a communication stream of its own."""
        if entry is not None:
            entry.done = self.now()
            entry.blocking = blocks_compute

    def blocking(self, call: Callable[[], Any], *, bucket: int, nbytes: int, kind: str) -> Any:
        """Run `call`, a collective its caller waits for (a broadcast of buffers or parameters), noted as
        blocking compute; its result."""
        entry = self.launching(bucket=bucket, nbytes=nbytes, kind=kind)
        result = call()
        self.finished(entry)
        return result

    @property
    def on_gpu(self) -> bool:
        return self._clock.on_gpu

    # -- the harness: reading it
    def rows(self) -> list[dict[str, Any]]:
        """Per collective: step, bucket, kind, bytes, ready/launched/done in ms from its step's start, and
        whether it blocked compute.

        On a GPU this waits for the device (call it after the measured window)."""
        self._clock.settle()
        rows = []
        for c in self._collectives:
            origin = self._origins[c.step]
            rows.append({
                "step": c.step, "bucket": c.bucket, "collective": c.kind, "bytes": c.nbytes,
                "ready_ms": self._clock.ms(origin, c.ready),
                "launched_ms": self._clock.ms(origin, c.launched),
                "done_ms": None if c.done is None else self._clock.ms(origin, c.done),
                "blocking": c.blocking,
            })  # fmt: skip
        return rows


def _stamp(entry: Collective, mark: Mark) -> None:
    entry.done = mark
