"""How communication and computation slow each other down when they overlap, on one rank: part
of `ddpbench collectives` (`harness.rank.collectives` calls it after the microbenchmarks), used by
the step-time model (`harness.perfmodel.network`).

An 8 MiB all-reduce and a burst of training-like compute are each timed alone, then together:
the all-reduce launched asynchronously and the burst run while it is in flight, as DDP overlaps
them. Each repeat times all three back to back and gives its own two slowdowns; the medians over
the repeats are the rank's (a drift of the machine between repeats moves both sides of a ratio).
A 4 KiB all-reduce, all latency, is timed the same way: on two busy CPU cores its call waits for
the scheduler (0.8-1 ms alone, 5-10 ms during compute here), far beyond the 8 MiB one's slowdown,
and a small bucket pays that per call.
On the CPU gloo's threads compete with the training thread for the same cores; the burst polls
the all-reduce between pieces to see when it finished (host clock). On GPUs NCCL runs on
its own stream, so both are timed with CUDA events: the burst on the compute stream, the
all-reduce's end by an event on a side stream that waits for it, both from one start event.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from harness.clock import Clock
from harness.config.collectives import ELEMENT_BYTES
from harness.results import model_tables

CONTENTION_BYTES = 8 * 1024**2
LATENCY_BYTES = 4 * 1024  # all latency: what each small bucket's all-reduce pays per call
CONTENTION_REPEATS = 11
BURST_PIECES = 60
PIECE_BATCH, PIECE_WIDTH = 32, 1024


def _compute_piece(device) -> Callable[[], None]:
    """A slice of training-like compute: one linear layer's product and its activation, a few
    milliseconds on a core. Its 4 MiB weight streams from memory as a layer's does in backward; an
    in-cache 192×192 product, measured with unpaired medians of 5 repeats, put the CPU all-reduce's
    slowdown anywhere from 1.0× to 2.7× over six runs of one machine (this piece, paired over 11
    repeats: 1.9–2.2× over five)."""
    import torch

    x = torch.randn(PIECE_BATCH, PIECE_WIDTH, device=device)
    weight = torch.randn(PIECE_WIDTH, PIECE_WIDTH, device=device)

    def piece() -> None:
        torch.tanh(x @ weight)

    return piece


def timed(function: Callable[[], None], device, *, barrier: bool = False) -> float:
    """Seconds `function`'s work takes on `device` (CUDA events around it on GPUs), after a barrier
    if asked."""
    import torch.distributed as dist

    clock = Clock(device)
    if barrier:
        clock.settle()
        dist.barrier()
    start = clock.mark()
    function()
    return clock.ms_after(start, clock.mark()) / 1e3


def measure_contention(session, watch=None) -> dict[str, float]:
    """How much an all-reduce in flight slows compute on the same rank, and the other way round.

    The compute burst is sized to outlast the all-reduce, so both overlapped times are measured
    while the other one runs. Per repeat: the all-reduce alone, the burst alone, both together.
    """
    import torch
    import torch.distributed as dist

    device = session.device
    buf = torch.ones(CONTENTION_BYTES // ELEMENT_BYTES, device=device)
    small = torch.ones(LATENCY_BYTES // ELEMENT_BYTES, device=device)
    piece = _compute_piece(device)

    def comm() -> None:
        dist.all_reduce(buf)

    def small_comm() -> None:
        dist.all_reduce(small)

    def burst(pieces: int) -> None:
        for _ in range(pieces):
            piece()

    piece(), comm(), small_comm(), Clock(device).settle()  # warm-up
    comm_first = statistics.median(timed(comm, device, barrier=True) for _ in range(3))
    piece_s = statistics.median(timed(piece, device) for _ in range(20))
    pieces = max(BURST_PIECES, int(3 * comm_first / piece_s))  # comfortably longer than the all-reduce
    overlap = _overlapped_on_gpu if device.type == "cuda" else _overlapped_on_host
    repeats, latencies = [], []
    for repeat in range(CONTENTION_REPEATS):
        comm_alone = timed(comm, device, barrier=True)
        compute_alone = timed(lambda: burst(pieces), device)
        compute_s, comm_s = overlap(buf, piece, pieces, device)
        repeats.append((compute_alone, compute_s, comm_alone, comm_s))
        latency_alone = timed(small_comm, device, barrier=True)
        latencies.append((latency_alone, overlap(small, piece, BURST_PIECES // 2, device)[1]))
        if watch is not None:
            watch.after(f"w{session.world_size}-contention", repeat, CONTENTION_REPEATS, phase="contention repeat")
    compute_alone, compute_overlapped, comm_alone, comm_overlapped = (
        statistics.median(column) * 1e3 for column in zip(*repeats, strict=True)
    )
    noise = max(r[0] for r in repeats) - min(r[0] for r in repeats)  # the burst alone's own spread over the repeats
    compute_slowdowns, comm_slowdowns, bounded = zip(*(slowdowns(*r, noise=noise) for r in repeats), strict=True)
    latency_alone, latency_overlapped = (statistics.median(column) * 1e3 for column in zip(*latencies, strict=True))
    return {
        "bytes": CONTENTION_BYTES,
        "compute_alone_ms": compute_alone,
        "compute_overlapped_ms": compute_overlapped,
        "comm_alone_ms": comm_alone,
        "comm_overlapped_ms": comm_overlapped,
        "compute_slowdown": statistics.median(compute_slowdowns),
        "compute_slowdown_at_least": 2 * sum(bounded) >= len(bounded),  # its median repeat's is only a bound
        "comm_slowdown": statistics.median(comm_slowdowns),
        "latency_alone_ms": latency_alone,
        "latency_overlapped_ms": latency_overlapped,
        "latency_slowdown": statistics.median(max(1.0, during / alone) for alone, during in latencies),
    }


def slowdowns(
    compute_alone: float, compute_overlapped: float, comm_alone: float, comm_overlapped: float, *, noise: float = 0.0
) -> tuple[float, float, bool]:
    """(compute, all-reduce) slowdowns of one repeat, each ≥ 1 (below is noise: overlap cannot speed
    anything up), and whether compute's is only a lower bound. The burst outlasts the all-reduce, so the
    all-reduce's overlapped time is its own; the burst's extra time is spread over the part of it the
    all-reduce overlapped (what slows compute is the communication in flight): compute ran at the solo
    compute done while the all-reduce ran (its time less the burst's extra) over that time. Where that
    solo compute is within `noise` (the burst alone's spread) of none (a burst that lost as long as the
    all-reduce lasted, or whose own spread is as long: a loaded machine), the ratio is not measured, and
    its denominator is taken at `noise`: a lower bound (a loaded CPU printed 4943055× over 1e-9)."""
    extra = compute_overlapped - compute_alone
    compute_during_comm = comm_overlapped - extra
    bounded = compute_during_comm <= noise
    compute = comm_overlapped / max(compute_during_comm, noise, 1e-9)
    return max(1.0, compute), max(1.0, comm_overlapped / comm_alone), bounded


def _overlapped_on_host(buf, piece, pieces: int, device) -> tuple[float, float]:
    """(burst, all-reduce) seconds with both in flight, host clock: the burst polls the all-reduce
    between pieces. An all-reduce that finished only after the burst counts the burst's time (a
    lower bound)."""
    import torch.distributed as dist

    clock = Clock(device)
    dist.barrier()
    work = dist.all_reduce(buf, async_op=True)
    began, finished_comm = clock.mark(), None
    for _ in range(pieces):
        piece()
        if finished_comm is None and work.is_completed():
            finished_comm = clock.ms(began, clock.mark()) / 1e3
    compute_s = clock.ms(began, clock.mark()) / 1e3
    work.wait()
    return compute_s, finished_comm if finished_comm is not None else compute_s


def _overlapped_on_gpu(buf, piece, pieces: int, device) -> tuple[float, float]:
    """(burst, all-reduce) seconds with both in flight, CUDA events from one start: NCCL's stream
    starts after it; a side stream waits for the all-reduce and marks its end (queued before the
    burst, so the mark is the all-reduce's end, not the host's arrival); the burst's end is marked
    on the compute stream."""
    import torch
    import torch.distributed as dist

    clock, side = Clock(device), torch.cuda.Stream(device)
    clock.settle()
    dist.barrier()
    start = clock.mark()
    work = dist.all_reduce(buf, async_op=True)
    with torch.cuda.stream(side):
        work.wait()  # the side stream (current here) waits for NCCL's end
        comm_end = clock.mark(side)
    for _ in range(pieces):
        piece()
    compute_s = clock.ms_after(start, clock.mark()) / 1e3
    clock.settle()
    return compute_s, clock.ms(start, comm_end) / 1e3


def contention_row(plan: dict[str, Any], per_rank: list[dict[str, float]], *, world_size: int) -> dict[str, Any]:
    """The ranks' medians combined: the mean over ranks, slowdowns alike (each rank's median of its
    repeats' slowdowns, `slowdowns`); compute's is a bound where any rank's is."""
    bound = "compute_slowdown_at_least"
    mean = {key: statistics.fmean(r[key] for r in per_rank) for key in per_rank[0] if key not in ("bytes", bound)}
    mean[bound] = any(bool(r.get(bound)) for r in per_rank)
    context = {k: v for k, v in plan["context"].items() if k in model_tables.CONTENTION_SCHEMA.names}
    return {**context, "world_size": world_size, "bytes": per_rank[0]["bytes"], **mean}
