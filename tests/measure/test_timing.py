"""Phase timing: each phase is the time between consecutive marks; the step is their sum."""

from __future__ import annotations

from harness.clock import Clock
from harness.measure.timing import PHASES, StepTimer


def test_wall_clock_timer_measures_each_phase_between_marks():
    ticks = iter([10.0, 10.002, 10.005, 10.0055, 10.0065, 20.0, 20.001, 20.002, 20.003, 20.004])
    timer = StepTimer(Clock(now=lambda: next(ticks)))
    for _ in range(2):
        timer.start()
        for phase in PHASES:
            timer.lap(phase)
    first, second = timer.collect()
    assert round(first["forward_ms"], 6) == 2.0
    assert round(first["backward_ms"], 6) == 3.0
    assert round(first["sync_ms"], 6) == 0.5
    assert round(first["optimizer_ms"], 6) == 1.0
    assert round(first["step_ms"], 6) == 6.5
    assert round(second["step_ms"], 6) == 4.0
