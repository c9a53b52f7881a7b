"""Collectives timed as nccl-tests times them: batches of back-to-back iterations, one
synchronize per batch, per rank a batch's mean, the slowest rank's counts; contention the same way."""

from __future__ import annotations

import time

import pytest
import torch

from harness.clock import Clock
from harness.config.collectives import BATCHES
from harness.rank import collectives, contention

CPU = torch.device("cpu")


def test_each_batch_is_timed_once_around_its_back_to_back_iterations(single_rank, monkeypatch):
    calls, marks = [], []
    real_mark = Clock.mark

    def mark(self, stream=None):
        marks.append(len(calls))  # how many iterations had run when the clock was read
        return real_mark(self, stream)

    monkeypatch.setattr(Clock, "mark", mark)

    def one_iteration():
        calls.append(1)
        time.sleep(0.002)

    per_batch = collectives.time_op(one_iteration, iters=5, warmup=2, device=CPU, batches=3)
    assert len(calls) == 2 + 3 * 5
    assert marks == [2, 7, 7, 12, 12, 17]  # one start and one end per batch, none between iterations
    assert len(per_batch) == 3
    assert all(0.002 <= seconds < 1.0 for seconds in per_batch)  # a batch's time / its iterations


def test_the_default_is_the_plans_batches(single_rank):
    assert len(collectives.time_op(lambda: None, iters=2, warmup=0, device=CPU)) == BATCHES


def test_the_slowest_ranks_mean_per_batch_counts_and_the_median_is_over_batches():
    plan = {"context": {"run_id": "r"}, "iters": 10, "warmup": 1}
    rank0 = [{"op": "all_reduce", "bytes": 1000, "times_s": [1e-3, 2e-3, 3e-3], "correct": True}]
    rank1 = [{"op": "all_reduce", "bytes": 1000, "times_s": [4e-3, 1e-3, 1e-3], "correct": True}]
    (row,) = collectives.combine(plan, [rank0, rank1], world_size=2)
    # Per batch the slower rank: 4, 2, 3 ms; median 3 ms.
    assert row["time_us"] == pytest.approx(3000.0)
    assert row["batches"] == 3 and row["iters"] == 10
    assert row["time_us_p10"] == pytest.approx(2200.0) and row["time_us_p90"] == pytest.approx(3800.0)
    assert row["algbw_gbps"] == pytest.approx(1000 / 3e-3 / 1e9)


def test_cpu_contention_is_measured_with_the_host_clock_on_one_rank(single_rank, monkeypatch):
    monkeypatch.setattr(contention, "CONTENTION_BYTES", 64 * 1024)
    monkeypatch.setattr(contention, "CONTENTION_REPEATS", 2)
    monkeypatch.setattr(contention, "BURST_PIECES", 5)
    measured = contention.measure_contention(single_rank)
    assert measured["bytes"] == 64 * 1024
    for key in ("compute_alone_ms", "compute_overlapped_ms", "comm_alone_ms", "comm_overlapped_ms"):
        assert measured[key] > 0, key
    assert measured["compute_slowdown"] >= 1.0 and measured["comm_slowdown"] >= 1.0
    assert measured["latency_alone_ms"] > 0 and measured["latency_overlapped_ms"] > 0
    assert measured["latency_slowdown"] >= 1.0
    # The all-reduce in flight ends no later than the burst it was measured against.
    assert measured["comm_overlapped_ms"] <= measured["compute_overlapped_ms"] + 1e-9


def test_a_repeats_slowdowns_spread_the_bursts_extra_time_over_the_all_reduce_it_overlapped():
    # Burst 30 ms alone, 33 ms overlapped: 3 ms lost while a 10 ms all-reduce ran, so 7 ms of solo
    # compute took 10 ms (×10/7). The all-reduce took 10 ms against 8 ms alone (×1.25).
    compute, comm, bounded = contention.slowdowns(30.0, 33.0, 8.0, 10.0, noise=1.0)
    assert compute == pytest.approx(10 / 7) and comm == pytest.approx(1.25) and not bounded
    # Faster together is noise: never below 1.
    assert contention.slowdowns(30.0, 29.0, 8.0, 7.0) == (1.0, 1.0, False)


def test_a_burst_that_lost_about_as_long_as_the_all_reduce_lasted_bounds_the_compute_slowdown():
    """A loaded CPU printed 'compute 4943055.01× slower': 10 ms lost during a 10 ms all-reduce leaves a denominator
    of nothing. Within the burst's own spread (2 ms) of none, the ratio is only bounded: 10 / 2, and said so."""
    compute, _, bounded = contention.slowdowns(30.0, 40.0 - 2e-6, 8.0, 10.0, noise=2.0)
    assert bounded and compute == pytest.approx(5.0)
    compute, _, bounded = contention.slowdowns(30.0, 45.0, 8.0, 10.0, noise=2.0)  # lost more than it lasted
    assert bounded and compute == pytest.approx(5.0)


def test_a_loaded_machine_gives_a_bound_not_a_runaway_ratio(single_rank, monkeypatch):
    """The measurement itself, with the burst stalled for as long as the all-reduce ran (what a competing process
    taking the core did): compute's slowdown comes back bounded and marked, not millions."""
    monkeypatch.setattr(contention, "CONTENTION_BYTES", 64 * 1024)
    monkeypatch.setattr(contention, "CONTENTION_REPEATS", 3)
    monkeypatch.setattr(contention, "BURST_PIECES", 5)
    overlapped = contention._overlapped_on_host

    def loaded(buf, piece, pieces, device):
        compute_s, comm_s = overlapped(buf, piece, pieces, device)
        # the burst lost the all-reduce's whole time and then some: twice its own, so that what it did while the
        # all-reduce ran (its solo time less this extra) is below none, whatever the load did to the burst alone
        return 2 * compute_s + comm_s, comm_s

    monkeypatch.setattr(contention, "_overlapped_on_host", loaded)
    measured = contention.measure_contention(single_rank)
    assert measured["compute_slowdown_at_least"] is True
    assert measured["compute_slowdown"] < 1e5  # comm over the burst's spread, not over 1e-9


def test_the_contention_row_is_the_mean_of_each_ranks_medians_slowdowns_included():
    plan = {"context": {"run_id": "r", "device": "cpu"}}
    ranks = [{"bytes": 8, "compute_alone_ms": 30.0, "compute_overlapped_ms": 33.0, "comm_alone_ms": 8.0,
              "comm_overlapped_ms": 10.0, "compute_slowdown": 1.4, "comm_slowdown": 1.2},
             {"bytes": 8, "compute_alone_ms": 32.0, "compute_overlapped_ms": 35.0, "comm_alone_ms": 9.0,
              "comm_overlapped_ms": 12.0, "compute_slowdown": 1.6, "comm_slowdown": 1.4}]  # fmt: skip
    ranks[1]["compute_slowdown_at_least"] = True  # a bound on any rank: the row's is one
    row = contention.contention_row(plan, ranks, world_size=2)
    assert row["compute_slowdown"] == pytest.approx(1.5) and row["comm_slowdown"] == pytest.approx(1.3)
    assert row["compute_slowdown_at_least"] is True
    assert row["comm_alone_ms"] == pytest.approx(8.5) and row["world_size"] == 2 and row["run_id"] == "r"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: CUDA events")
def test_a_batch_on_a_gpu_is_timed_with_events_not_the_host():
    device = torch.device("cuda")
    clock = Clock(device)
    start = clock.mark()
    a = torch.randn(2048, 2048, device=device)
    for _ in range(10):
        a = a @ a / 2048
    seconds = clock.ms_after(start, clock.mark()) / 1e3
    assert isinstance(start, torch.cuda.Event) and seconds > 0
