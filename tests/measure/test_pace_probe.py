"""The dry run's matmul probe (harness.measure.pace.probe_rate): its rule on a fake timer, no matmul run."""

from __future__ import annotations

import pytest

from harness.measure import pace


def timer(rate: float, stretched: dict[int, list[float]] | None = None):
    """A fake `time_matmul`: a size² matmul at `rate` FLOP/s, except the timings `stretched` lists for a size, in
    order, which a busy host stretched by that factor (the probe cannot tell them from the rest but by their time)."""
    pending = {size: list(factors) for size, factors in (stretched or {}).items()}
    calls: list[int] = []

    def time_matmul(size: int) -> float:
        calls.append(size)
        factor = pending.get(size, []).pop(0) if pending.get(size) else 1.0
        return 2 * size**3 / rate * factor

    return time_matmul, calls


def test_the_rate_is_the_fastest_timing_so_a_busy_host_s_stretched_ones_do_not_lower_it():
    """The walkthrough's 0.0476 GFLOP/s (16-36 otherwise): a loaded host stretches timings, never shortens them."""
    time_matmul, calls = timer(50e9, {256: [20.0] * 10})  # the first 10 timings at 256² read 20× slow
    probe = pace.probe_rate(time_matmul)
    assert probe.flops_per_s == pytest.approx(50e9)
    assert probe.size == 256 and probe.timings == len(calls) > 10
    every_256_slow = pace.probe_rate(timer(50e9, {256: [500.0] * 99})[0])  # the cap ends it: 128²'s tries stand
    assert every_256_slow.flops_per_s == pytest.approx(50e9) and every_256_slow.size == 128


def test_sizes_grow_while_the_next_stays_short_each_judged_by_its_fastest_try():
    time_matmul, calls = timer(50e9, {128: [1000.0, 1000.0]})  # one try of three at 128² undisturbed
    probe = pace.probe_rate(time_matmul)
    # 256² takes 0.67 ms at 50 GFLOP/s: 512² (8×) would outlast SHORT_S, so 256 is timed
    assert calls[: 2 * pace.SIZE_TRIES] == [128] * pace.SIZE_TRIES + [256] * pace.SIZE_TRIES
    assert set(calls[2 * pace.SIZE_TRIES :]) == {256} and probe.size == 256
    assert pace.probe_rate(timer(50e12)[0]).size == pace.PROBE_SIZE  # a fast device: up to the largest
    assert probe.words() == f"the fastest of {probe.timings} timings of a 256² matmul"


def test_timings_are_at_least_the_least_count_and_capped_for_an_emulated_dtype():
    slow = pace.probe_rate(timer(1e6)[0])  # 128² takes 4.2 s: the least count would take 42 s
    assert slow.size == pace.PROBE_START and slow.flops_per_s == pytest.approx(1e6)
    assert slow.timings == pace.SIZE_TRIES + 1  # the cap stops it after one timed matmul past the tries
    quick = pace.probe_rate(timer(50e9)[0], start=256, largest=256)  # a given size alone
    assert quick.size == 256 and quick.timings >= pace.SIZE_TRIES + pace.LEAST_TIMINGS
