"""A rank process's housekeeping between configurations and at its end: memory given back so that
the next configuration's peaks are its own, a CPU rank's heap kept from step to step the same way in every
configuration (`keep_freed_heap`), and a quick exit once everything is written.

Both are part of a `bench` run's fixed cost (`harness.handoff.costs`): a full garbage collection
over the 450k objects torch, transformers and pandas leave after import costs 0.2-0.4 s on a CPU,
and the interpreter's own finalisation about 1 s, paid by every configuration and every launch.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import gc
import os
import sys

import torch

_FREEZING = False

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
HEAP_KEPT_BYTES = 32 * 1024 * 1024
"""What glibc keeps on its heap once freed, and the size below which it serves a block from that heap (its
largest mmap threshold on 64 bits): a step's gradients and activations, freed and made again every step."""


def freeze_survivors() -> None:
    """From now on, what survives a full collection is the process's own (modules, caches, the
    session): later collections skip it (gc.freeze), so each costs what the configuration made,
    not 0.3 s. Frozen objects are still freed when their last reference goes; only a frozen
    reference cycle that later became garbage would stay. For a rank process only (its main):
    a test runner's heap is not a rank's."""
    global _FREEZING
    _FREEZING = True
    gc.collect()
    gc.freeze()


def release_memory(*devices: torch.device) -> None:
    """Give back what the last configuration held on `devices`, so the next one's peaks are its own."""
    gc.collect()
    if _FREEZING:
        gc.freeze()  # what a configuration imported lazily (transformers) is the process's too
    if any(device.type == "cuda" for device in devices):
        torch.cuda.empty_cache()  # every GPU's cache, whichever is current (a DataParallel replica's too)
    trim_heap()


def keep_freed_heap() -> None:
    """On the CPU, fix glibc's thresholds so that the memory a step frees stays on the heap for the next step, as
    a GPU's caching allocator keeps it, in every configuration alike. Left dynamic, glibc raised its mmap threshold
    at the first large free, and from then on gave the top of its heap back to the kernel after a step and faulted
    it in again the next, by an amount that depended on what ran before: mlp/small at 1 thread faulted 8,160 pages
    (32 MiB) a step in a launch's later configurations and 2,000-8,300 in its first, whose step then took 10-25 %
    less CPU (benchmarks/launch_order.py). Between configurations `release_memory` still trims (malloc_trim
    ignores the threshold), so each one's peaks stay its own."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its allocator's own ways
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, HEAP_KEPT_BYTES)
        libc.mallopt(M_TRIM_THRESHOLD, 4 * HEAP_KEPT_BYTES)


def trim_heap() -> None:
    """glibc keeps freed heap pages resident; without this, RSS peaks carry over between configurations."""
    # Not glibc (no malloc_trim): RSS peaks may then include memory an earlier configuration freed.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


def exit_now(code: int) -> None:
    """End the process without the interpreter's finalisation (about 1 s with torch loaded, which
    the launch waits for): the caller has written and closed its files and left its process
    group; atexit's handlers (e.g. the parity cache's removal) and the streams' buffers still run."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
