"""Per-phase step timing, on the rank's clock (harness.clock: the wall clock on the CPU, CUDA events
on GPUs).

Marks are taken at phase boundaries and read once, after the measured window (the clock's
synchronisation rule), so timing adds no host synchronisation per step: that would serialise the
CPU with the GPU and hide launch overheads the real training loop has.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from harness.analysis.overlap import SPANS
from harness.clock import Clock, Mark
from harness.results.dictionary.columns import PHASES  # noqa: F401 (the phases, named once in the column dictionary)


class StepTimer:
    """Marks per step: `start`, then `lap(phase)` at the end of each of PHASES (in order); a phase lapped several
    times in a step (forward and backward, once per micro-batch under gradient accumulation) is their sum."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self._steps: list[list[tuple[str, Mark]]] = []

    def start(self) -> None:
        """Begin a step."""
        self._steps.append([("start", self.clock.mark())])

    def lap(self, phase: str) -> None:
        """End `phase` of the current step."""
        self._steps[-1].append((phase, self.clock.mark()))

    def collect(self) -> list[dict[str, float]]:
        """Per step: {"step_ms", "<phase>_ms" …}, in milliseconds (waits for the device first)."""
        self.clock.settle()
        return [self._durations(marks) for marks in self._steps]

    def window_ms(self) -> float | None:
        """From the first step's start to the last step's end (after `collect`): the steps and
        whatever ran between them (zeroing gradients, making batches, gaps)."""
        return self.clock.ms(self._steps[0][0][1], self._steps[-1][-1][1]) if self._steps else None

    def _durations(self, marks: list[tuple[str, Mark]]) -> dict[str, Any]:
        row: dict[str, Any] = {}
        spans: dict[str, list[tuple[float, float]]] = {}
        for (_, prev), (phase, mark) in itertools.pairwise(marks):
            row[f"{phase}_ms"] = row.get(f"{phase}_ms", 0.0) + self.clock.ms(prev, mark)
            spans.setdefault(phase, []).append((self.clock.ms(marks[0][1], prev), self.clock.ms(marks[0][1], mark)))
        row["step_ms"] = self.clock.ms(marks[0][1], marks[-1][1])
        if any(len(each) > 1 for each in spans.values()):
            # Micro-batches interleave forward and backward: where each ran, for overlap.phase_spans (summed
            # durations alone would put micro-batch 2's forward, and its all-gathers, inside "backward").
            row[SPANS] = spans
        return row


def make_step_timer(device: torch.device) -> StepTimer:
    return StepTimer(Clock(device))
