"""The rank side's one clock: marks in time, and the milliseconds between two of them.

Every timer of a rank (the step's phases, the gradient-ready profile, the bucket timeline, the
collectives' batches, the contention bursts) takes its marks here, so that they all line up:

- on the CPU a mark is `time.perf_counter()`, taken now;
- on a GPU a mark is a CUDA event recorded on a stream (the device's current one unless told): a
  point in that stream's queue, which gets its time when the device passes it.

The synchronisation rule, stated once for all of them: **taking a mark never waits for the device.**
A GPU mark has a time only once the device has passed it, so whoever times a window of work calls
`settle()` (one device synchronize) after the window and before reading any duration in it, never
between its marks: a synchronize inside the window would serialise the host with the device and hide
the launch overheads a real training loop has. `ms_after(start, end)` waits for `end` alone, for one
batch of work timed by itself (as nccl-tests times a batch of iterations).

Host-only durations (how long a configuration took as a whole, the launch's fixed-cost account) are
`host_seconds()`: what the host spent, whatever the device did meanwhile.

A leaf of the contract: the bucket timeline (harness.comm_timeline), which the strategies use, takes
its marks here too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

Mark = Any
"""A point in time: seconds (a float) on the CPU, a recorded `torch.cuda.Event` on a GPU."""


def host_seconds() -> float:
    """The host's monotonic clock, in seconds: for durations the device has no part in."""
    return time.perf_counter()


class Clock:
    """Marks on `device`'s clock (CPU: the host's; CUDA: events). `now` replaces the host clock (tests)."""

    def __init__(self, device: torch.device | str | None = None, *, now: Callable[[], float] = host_seconds) -> None:
        import torch  # here, not at the top: the command line reads host_seconds before torch's 2-3 s import

        self.device = torch.device(device if device is not None else "cpu")
        self.on_gpu = self.device.type == "cuda"
        self._now = now
        self._cuda = torch.cuda

    def mark(self, stream: Any = None) -> Mark:
        """Now: on a GPU, an event recorded on `stream` (default: the device's current stream)."""
        if not self.on_gpu:
            return self._now()
        event = self._cuda.Event(enable_timing=True)
        event.record(stream if stream is not None else self._cuda.current_stream(self.device))
        return event

    def settle(self) -> None:
        """Wait until the device has passed every mark taken so far (nothing to wait for on the CPU)."""
        if self.on_gpu:
            self._cuda.synchronize(self.device)

    def ms(self, start: Mark, end: Mark) -> float:
        """Milliseconds from `start` to `end`; on a GPU, after `settle()`."""
        return start.elapsed_time(end) if self.on_gpu else (end - start) * 1e3

    def ms_after(self, start: Mark, end: Mark) -> float:
        """Milliseconds from `start` to `end`, waiting for `end` first (on a GPU): one timed batch."""
        if self.on_gpu:
            end.synchronize()
        return self.ms(start, end)
