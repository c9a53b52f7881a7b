"""Per-phase step timing: wall clock on the CPU, CUDA events on GPUs.

The CUDA timer records events at phase boundaries and reads them once, after the measured
window, so timing adds no host synchronisation per step (that would serialise the CPU with
the GPU and hide launch overheads the real training loop has).
"""

from __future__ import annotations

import itertools
import time
from typing import Protocol

import torch

from harness.results.columns import PHASES  # noqa: F401 (the phases, named once in the column dictionary)


class StepTimer(Protocol):
    def start(self) -> None:
        """Begin a step."""

    def lap(self, phase: str) -> None:
        """End `phase` (one of PHASES, in order) of the current step."""

    def collect(self) -> list[dict[str, float]]:
        """Per step: {"step_ms", "<phase>_ms" …}, in milliseconds."""

    def window_ms(self) -> float | None:
        """From the first step's start to the last step's end (after `collect`): the steps and
        whatever ran between them (zeroing gradients, making batches, gaps)."""


class WallClockTimer:
    def __init__(self, clock=time.perf_counter) -> None:
        self._clock = clock
        self._steps: list[list[tuple[str, float]]] = []

    def start(self) -> None:
        self._steps.append([("start", self._clock())])

    def lap(self, phase: str) -> None:
        self._steps[-1].append((phase, self._clock()))

    def collect(self) -> list[dict[str, float]]:
        return [_durations(marks, lambda a, b: (b - a) * 1e3) for marks in self._steps]

    def window_ms(self) -> float | None:
        return (self._steps[-1][-1][1] - self._steps[0][0][1]) * 1e3 if self._steps else None


class CudaEventTimer:
    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._steps: list[list[tuple[str, torch.cuda.Event]]] = []

    def _event(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self._device))
        return event

    def start(self) -> None:
        self._steps.append([("start", self._event())])

    def lap(self, phase: str) -> None:
        self._steps[-1].append((phase, self._event()))

    def collect(self) -> list[dict[str, float]]:
        torch.cuda.synchronize(self._device)
        return [_durations(marks, lambda a, b: a.elapsed_time(b)) for marks in self._steps]

    def window_ms(self) -> float | None:
        return self._steps[0][0][1].elapsed_time(self._steps[-1][-1][1]) if self._steps else None


def _durations(marks, elapsed) -> dict[str, float]:
    row = {f"{phase}_ms": elapsed(prev, mark) for (_, prev), (phase, mark) in itertools.pairwise(marks)}
    row["step_ms"] = elapsed(marks[0][1], marks[-1][1])
    return row


def make_step_timer(device: torch.device) -> StepTimer:
    return CudaEventTimer(device) if device.type == "cuda" else WallClockTimer()
