"""The fastest a configuration's steps can run here, from the FLOPs its model needs: a floor under a run's time for
the configurations no earlier run measured (`bench --dry-run`, and a full-size run's start).

A step cannot run faster than its training FLOPs (forward and backward, counted by FlopCounterMode on the meta
device: no memory, no time) at the most this device computes: on the CPU, what one rank's threads reach on a
large matmul in the run's dtype, timed here and now (a model's step runs below it: convolutions, attention,
elementwise work and the optimizer reach less; a CPU without bf16 (fp16) instructions emulates them, far
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

import functools
import time

import torch

from harness.config.precision import BYTES_A_PARAMETER
from harness.measure.modelinfo import META, flops_per_sample

PROBE_SIZE = 1024  # a matmul large enough to run at the BLAS kernel's best on a CPU core
PROBE_SECONDS = 0.2
PROBE_START = 128  # the first size tried, doubled up to PROBE_SIZE (cpu_flops_per_s)


@functools.cache  # a command times it once (the forecast, the bf16 warning and the floor)
def cpu_flops_per_s(threads: int, dtype: str = "fp32", size: int | None = None) -> float:
    """The FLOP/s a rank of `threads` threads reaches on square matmuls in `dtype` (fp32, bf16 or fp16, as autocast
    computes them): the best of a few timed batches over about PROBE_SECONDS, at PROBE_SIZE² or, where a matmul
    runs so slowly that one at the next size up would outlast twice that (emulated bf16, fp16), the largest size before
    it; at `size`² alone where given. The first call at each size warms the kernel up and is not counted."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    kind = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)
    try:
        largest, size = size or PROBE_SIZE, size or PROBE_START
        while True:
            a, b = torch.randn(size, size, dtype=kind), torch.randn(size, size, dtype=kind)
            began = time.perf_counter()
            torch.mm(a, b)
            if size >= largest or (time.perf_counter() - began) * 8 >= 2 * PROBE_SECONDS:  # 2× the side: 8× the work
                break
            size *= 2
        best, spent = 0.0, 0.0
        while spent < PROBE_SECONDS:
            began = time.perf_counter()
            torch.mm(a, b)
            took = time.perf_counter() - began
            spent += took
            best = max(best, 2 * size**3 / took)
        return best
    finally:
        torch.set_num_threads(before)


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
    """The least time `cfg`'s warm-up and timed steps take: each rank's batch at `flops_per_s`, the node's ranks
    of `threads` threads sharing `cores` where they outnumber them (a GPU rank has its own GPU: cores None)."""
    per_step = flops_per_sample * cfg.batch_size / flops_per_s
    ranks_here = cfg.world_size // max(cfg.nnodes, 1) + cfg.extra_ranks
    turns = max(1.0, ranks_here * threads / cores) if cores else 1.0
    return (cfg.warmup + cfg.steps) * per_step * turns


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
