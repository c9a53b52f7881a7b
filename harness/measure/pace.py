"""The fastest a configuration's steps can run here, from the FLOPs its model needs: a floor under a run's time for
the configurations no earlier run measured (`bench --dry-run`, and a full-size run's start).

A step cannot run faster than its training FLOPs (forward and backward, counted by FlopCounterMode on the meta
device: no memory, no time) at the most this device computes: on the CPU, what one rank's threads reach on the
fastest of many short matmuls in the run's dtype, timed here and now (a model's step runs below it: convolutions,
attention, elementwise work and the optimizer reach less; a CPU without bf16 (fp16) instructions emulates them, far
slower than fp32); on a GPU, the datasheet's dense peak for the run's precision. Ranks that outnumber the cores take
turns on them. The floor leaves out launches, building and the parity check, which the fixed cost counts, and every
strategy's communication: it is a lower bound, said as one.

A step cannot run faster than its memory traffic either, which the FLOPs leave out: an embedding table's dense
gradient and Adam's pass over it (a DLRM of 13.6M parameters, 1 MFLOP a sample, stepped 100-400× its FLOPs floor).
Each step writes every trained parameter's fp32 gradient and its optimizer reads and writes BYTES_A_PARAMETER of each
(a rank of a strategy that shards the optimizer's state, its share), at the most this device moves: on the CPU, a
rank's threads copying a buffer the size of the parameters, timed here and now (the optimizer's arrays are larger,
and its kernels make several passes: slower); on a GPU, the datasheet's bandwidth (`memory_floor_s`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import torch

from harness.config.precision import BYTES_A_PARAMETER
from harness.measure.modelinfo import META, flops_per_sample

PROBE_SIZE = 1024  # the largest matmul timed: large enough to run at the BLAS kernel's best on a CPU core
PROBE_START = 128  # the first size tried, doubled up to PROBE_SIZE while a matmul stays short (probe_rate)
SHORT_S = 0.002
"""A timing this short fits a scheduler's time slice on a loaded host, so that some of them run undisturbed: at 8
extra busy threads on 2 cores, the best of 0.2 s of 1024² matmuls read 3.9-6.9 GFLOP/s here, of 256² ones 84-103
(103 quiet). A probe of a few long timings once read 0.0476 GFLOP/s under load (16-36 otherwise)."""
SIZE_TRIES = 3  # a size is judged by the fastest of these timings, not by one that the host may have stretched
LEAST_TIMINGS = 10
PROBE_SECONDS = 0.2  # the timings go on until both LEAST_TIMINGS and this long are reached ...
PROBE_CAP_SECONDS = 2.0  # ... or this long (an emulated bf16's smallest matmul may take tens of ms)


@dataclasses.dataclass(frozen=True)
class Probe:
    """A matmul probe's answer: the most FLOP/s it timed, at which size, and over how many timings."""

    flops_per_s: float
    size: int
    timings: int

    def words(self) -> str:
        """How the rate was found, for the forecast to say beside it."""
        return f"the fastest of {self.timings} timings of a {self.size}² matmul"


def probe_rate(time_matmul: Callable[[int], float], *, start: int = PROBE_START, largest: int = PROBE_SIZE) -> Probe:
    """The usual microbenchmark rule, over `time_matmul(size)` (seconds for one size² matmul, warmed up): the size
    doubles from `start` up to `largest` while the next size's matmul (8× the work) would stay within SHORT_S, each
    judged by its fastest of SIZE_TRIES; then that size is timed at least LEAST_TIMINGS times over PROBE_SECONDS
    (capped at PROBE_CAP_SECONDS), and the rate is the best of every timing: a busy host only ever slows a timing,
    so the fastest is the one it disturbed least. Pure: the timer is given."""
    size, timings = start, 0
    best = {}
    while True:
        best[size] = min(time_matmul(size) for _ in range(SIZE_TRIES))
        timings += SIZE_TRIES
        if size * 2 > largest or best[size] * 8 > SHORT_S:
            break
        size *= 2
    spent, count = 0.0, 0
    while (count < LEAST_TIMINGS or spent < PROBE_SECONDS) and spent < PROBE_CAP_SECONDS:
        took = time_matmul(size)
        best[size], spent, count = min(best[size], took), spent + took, count + 1
    fastest = max(best, key=lambda s: (2 * s**3 / best[s], s))  # a tie: the larger size, the one timed most
    return Probe(2 * fastest**3 / best[fastest], fastest, timings + count)


@functools.cache  # a command times it once (the forecast, the bf16 warning and the floor)
def cpu_probe(threads: int, dtype: str = "fp32", size: int | None = None) -> Probe:
    """The FLOP/s a rank of `threads` threads reaches on square matmuls in `dtype` (fp32, bf16 or fp16, as autocast
    computes them), by `probe_rate`'s rule; at `size`² alone where given. The first matmul at each size warms the
    kernel up and is not counted."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    kind = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)
    operands: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def time_matmul(side: int) -> float:
        if side not in operands:
            operands[side] = torch.randn(side, side, dtype=kind), torch.randn(side, side, dtype=kind)
            torch.mm(*operands[side])  # warm-up, not counted
        began = time.perf_counter()
        torch.mm(*operands[side])
        return time.perf_counter() - began

    try:
        return probe_rate(time_matmul, start=size or PROBE_START, largest=size or PROBE_SIZE)
    finally:
        torch.set_num_threads(before)


def cpu_flops_per_s(threads: int, dtype: str = "fp32", size: int | None = None) -> float:
    """`cpu_probe`'s rate alone."""
    return cpu_probe(threads, dtype, size).flops_per_s


def training_flops_per_sample(workload) -> float | None:
    """FLOPs of one sample's forward and backward, counted on the meta device; None where the model cannot run
    there (a workload that reads values, an op without a meta kernel)."""
    try:
        with META:
            model = workload.build_model()
        return flops_per_sample(workload, model, device=META)
    except Exception:  # counting is a nicety: the forecast then says the configuration is not counted
        return None


def compute_floor_s(cfg, *, flops_per_sample: float, flops_per_s: float, threads: int, cores: int | None) -> float:
    """The least time `cfg`'s warm-up and timed steps take: each rank's batch at `flops_per_s` (its K micro-batches'
    under --grad-accum K), the node's ranks of `threads` threads sharing `cores` where they outnumber them (a GPU
    rank has its own GPU: cores None)."""
    per_step = flops_per_sample * step_samples(cfg) / flops_per_s
    ranks_here = cfg.world_size // max(cfg.nnodes, 1) + cfg.extra_ranks
    turns = max(1.0, ranks_here * threads / cores) if cores else 1.0
    return (cfg.warmup + cfg.steps) * per_step * turns


def step_samples(cfg) -> int:
    """The samples one rank's step trains on: its `grad_accum` micro-batches of `batch_size`."""
    return cfg.batch_size * cfg.grad_accum


GRADIENT_BYTES = 4
"""What a step's backward writes per trained fp32 parameter: its gradient (an embedding's whole table, dense)."""
COPY_SECONDS = 0.1
MIB = 2**20


@functools.cache
def cpu_copy_bytes_per_s(threads: int, nbytes: int) -> float:
    """The bytes a second (read and written) a rank of `threads` threads moves copying a buffer of `nbytes`, taken
    down to a power of two within 1 MiB to 256 MiB (a smaller buffer stays in faster caches: never a higher floor),
    into another: the best of the copies over about COPY_SECONDS, the first (its pages' first touch) not counted."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        size = 1 << (max(MIB, min(nbytes, 256 * MIB)).bit_length() - 1)
        source, target = torch.ones(size // 4), torch.empty(size // 4)
        target.copy_(source)
        best, spent = 0.0, 0.0
        while spent < COPY_SECONDS:
            began = time.perf_counter()
            target.copy_(source)
            took = time.perf_counter() - began
            spent += took
            best = max(best, 2 * size / took)
        return best
    finally:
        torch.set_num_threads(before)


def step_bytes(cfg, *, trained: int, shards: bool) -> float:
    """The bytes a rank of `cfg` reads and writes a step at least: every trained parameter's gradient and its
    optimizer's pass (`shards`: the strategy's rank updates its share)."""
    optimizer = BYTES_A_PARAMETER.get(cfg.optimizer, BYTES_A_PARAMETER["sgd"])
    return trained * (GRADIENT_BYTES + optimizer / (cfg.world_size if shards else 1))


def memory_floor_s(cfg, *, step_bytes: float, bytes_per_s: float, threads: int, cores: int | None) -> float:
    """The least time `cfg`'s warm-up and timed steps take by their memory traffic (`step_bytes`, a rank's) at
    `bytes_per_s`, the node's ranks taking turns on the cores as `compute_floor_s` has them."""
    ranks_here = cfg.world_size // max(cfg.nnodes, 1) + cfg.extra_ranks
    turns = max(1.0, ranks_here * threads / cores) if cores else 1.0
    return (cfg.warmup + cfg.steps) * step_bytes / bytes_per_s * turns
