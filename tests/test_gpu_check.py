"""benchmarks/gpu_check.py's own arithmetic: communication/compute overlap read from a trace's GPU
kernels (the figure the bucket timeline's overlap_efficiency is checked against), and its usage."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import gpu_check


def kernel(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur}


def test_nccl_kernels_are_communication_and_every_other_kernel_compute():
    trace = {"traceEvents": [kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 10), kernel("sm90_gemm", 5, 20),
                             {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 99}]}  # fmt: skip
    comm, compute = gpu_check.trace_intervals(trace)
    assert comm == [(0.0, 10.0)] and compute == [(5.0, 25.0)]


def test_overlap_is_the_share_of_communication_time_with_compute_running():
    # Two all-reduces of 10 µs; compute covers the second half of the first and the first half of the second.
    assert gpu_check.overlap_share([(0, 10), (20, 30)], [(5, 25)]) == pytest.approx(0.5)
    # Overlapping compute kernels are merged first: time is not counted twice.
    assert gpu_check.overlap_share([(0, 10)], [(0, 8), (2, 6)]) == pytest.approx(0.8)
    assert gpu_check.overlap_share([(0, 10)], []) == 0.0
    assert gpu_check.overlap_share([], [(0, 10)]) is None  # no communication: nothing to judge


def test_bad_usage_exits_2_without_running_anything(capsys):
    assert gpu_check.main([]) == 2
    assert gpu_check.main(["--quick"]) == 2
    assert "usage: python benchmarks/gpu_check.py OUT_DIR [--quick]" in capsys.readouterr().err
