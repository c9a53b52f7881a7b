"""A CPU rank's heap: what a step frees is kept for the next, whatever ran before (`keep_freed_heap`)."""

from __future__ import annotations

import resource

import pytest
import torch

from harness.rank.housekeeping import HEAP_KEPT_BYTES, keep_freed_heap, trim_heap

BLOCK = 4 * 1024 * 1024  # an mlp/small layer's gradient
BLOCKS = 25  # 100 MiB a step: above what glibc's dynamic trim threshold keeps (at most 64 MiB), below ours


def faults_a_step(steps: int = 4) -> int:
    """Pages faulted in by the last of `steps` steps that each make, touch and free BLOCKS gradients."""
    faulted = 0
    for _ in range(steps):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        grads = [torch.ones(BLOCK // 4) for _ in range(BLOCKS)]
        del grads
        faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return faulted


@pytest.mark.skipif(not hasattr(resource, "getrusage"), reason="page faults are counted by getrusage")
def test_a_steps_memory_is_reused_not_faulted_in_again():
    """Left dynamic, glibc gave the top of its heap back after every such step and faulted all 25,600 pages in
    again the next (the count a launch's later configurations paid and its first often did not)."""
    keep_freed_heap()
    trim_heap()  # as between configurations: the heap starts from what the kernel holds
    assert faults_a_step() < BLOCKS * BLOCK // 4096 // 10
    assert BLOCKS * BLOCK < 4 * HEAP_KEPT_BYTES
