"""benchmarks/trace_overlap.py: communication/compute overlap read from a profiler trace, the
independent figure the bucket timeline's overlap is checked against (on a GPU by gpu_check.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import trace_overlap

from harness.rank.profiling import PROFILE_SCHEDULE, TIMELINE_KEY


def event(name: str, ts: float, dur: float, cat: str, **where) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **where}


def test_on_a_gpu_nccl_kernels_and_gloo_staging_are_communication_and_other_kernels_compute():
    compute_stream, gloo_stream, other_gloo_stream = ({"args": {"stream": s}} for s in (7, 13, 17))
    trace = {"traceEvents": [
        event("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 10, "kernel", **gloo_stream),
        event("sm90_gemm", 5, 20, "kernel", **compute_stream),
        # gloo stages one bucket: to the host, the all-reduce there, and back: one span, on the GPU's clock
        event("Memcpy DtoH (Device -> Pinned)", 30, 4, "gpu_memcpy", **gloo_stream),
        event("Memcpy HtoD (Pinned -> Device)", 44, 2, "gpu_memcpy", **gloo_stream),
        event("Memcpy DtoH (Device -> Pinned)", 31, 2, "gpu_memcpy", **other_gloo_stream),  # another bucket
        event("Memcpy HtoD (Pinned -> Device)", 50, 3, "gpu_memcpy", **other_gloo_stream),
        event("Memcpy HtoD (Pageable -> Device)", 60, 2, "gpu_memcpy", **compute_stream),  # a batch: not comm
        event("gloo:all_reduce", 20, 20, "user_annotation", pid=1, tid=99),  # the host's view: ahead of the GPU
        event("aten::mm", 0, 99, "cpu_op", pid=1, tid=1),  # host operators are not compute on a GPU
    ]}  # fmt: skip
    comm, compute = trace_overlap.trace_intervals(trace)
    assert sorted(comm) == [(0.0, 10.0), (30.0, 46.0), (31.0, 53.0)]
    assert compute == [(5.0, 25.0)]


def test_a_copy_back_without_its_copy_out_is_no_span():
    copies = [event("Memcpy HtoD (Pinned -> Device)", 0, 2, "gpu_memcpy", args={"stream": 13}),
              event("Memcpy DtoH (Device -> Pinned)", 5, 2, "gpu_memcpy", args={"stream": 13}),
              event("Memcpy DtoH (Device -> Pinned)", 6, 2, "gpu_memcpy", args={"stream": 13}),  # the same staging
              event("Memcpy HtoD (Pinned -> Device)", 9, 1, "gpu_memcpy", args={"stream": 13})]  # fmt: skip
    assert trace_overlap.staged_spans(copies) == [(5.0, 10.0)]


def test_on_the_cpu_gloo_annotations_are_communication_and_the_training_threads_operators_compute():
    main, gloo = {"pid": 1, "tid": 1}, {"pid": 1, "tid": 2}
    trace = {"traceEvents": [
        event("ProfilerStep#2", 0, 100, "user_annotation", **main),
        event("aten::mm", 10, 20, "cpu_op", **main),
        event("c10d::allreduce_", 30, 5, "cpu_op", **main),  # launching (or waiting for) a collective
        event("aten::add_", 50, 10, "cpu_op", **gloo),  # another thread's operator: not the training's
        event("gloo:all_reduce", 35, 30, "user_annotation", **gloo),
    ]}  # fmt: skip
    comm, compute = trace_overlap.trace_intervals(trace)
    assert comm == [(35.0, 65.0)]
    assert compute == [(10.0, 30.0)]


def test_overlap_is_the_share_of_communication_time_with_compute_running():
    # Two all-reduces of 10 µs; compute covers the second half of the first and the first half of the second.
    assert trace_overlap.overlap([(0, 10), (20, 30)], [(5, 25)]).share == pytest.approx(0.5)
    # Overlapping compute (or communication) is merged first: time is not counted twice.
    assert trace_overlap.overlap([(0, 10), (2, 4)], [(0, 8), (2, 6)]).share == pytest.approx(0.8)
    assert trace_overlap.overlap([(0, 10)], []).share == 0.0
    assert trace_overlap.overlap([], [(0, 10)]).share is None  # no communication: nothing to judge


def test_ranks_add_up_as_totals_and_the_timeline_figures_come_from_the_traces(tmp_path):
    def rank(path: Path, comm: tuple, compute: tuple, timeline: dict | None) -> None:
        events = [event("ProfilerStep#2", 0, 1000, "user_annotation", pid=1, tid=1),
                  event("gloo:all_reduce", comm[0], comm[1] - comm[0], "user_annotation", pid=1, tid=2),
                  event("aten::mm", compute[0], compute[1] - compute[0], "cpu_op", pid=1, tid=1)]  # fmt: skip
        path.write_text(json.dumps({"traceEvents": events, **({TIMELINE_KEY: timeline} if timeline else {})}))

    rank(tmp_path / "rank0.json", (0, 100), (0, 100), {"comm_ms": 0.1, "exposed_comm_ms": 0.0})  # all hidden
    rank(tmp_path / "rank1.json", (0, 300), (0, 0), {"comm_ms": 0.3, "exposed_comm_ms": 0.3})  # none hidden
    traced, timed = trace_overlap.run_overlap(tmp_path)
    assert traced.share == pytest.approx(0.25) and timed.share == pytest.approx(0.25)  # 100 of 400 µs
    rank(tmp_path / "rank1.json", (0, 300), (0, 0), None)  # a trace without the timeline's figures
    assert trace_overlap.run_overlap(tmp_path)[1] is None


def test_each_timed_strategys_trace_carries_the_timelines_figures_for_its_traced_steps(small_run):
    """The bench run of the suite (--profile --bucket-timeline): per rank, the figures cover the
    traced steps only, and where nothing overlaps (naive) the trace agrees."""
    configs = pd.read_parquet(small_run / "configs").set_index("config_id")
    traced_steps = list(range(4 + 2 + PROFILE_SCHEDULE["wait"] + PROFILE_SCHEDULE["warmup"], 4 + 2 + 5))
    for config_id, row in configs.query("world_size == 2 and status == 'ok'").iterrows():
        for rank in (0, 1):
            trace = json.loads((small_run / row["trace_dir"] / f"rank{rank}.json").read_text())
            figures = trace.get(TIMELINE_KEY)
            if pd.isna(row["comm_ms"]):  # collectives not timed: nothing to carry
                assert figures is None, config_id
                continue
            assert figures["steps"] == traced_steps, config_id
            assert 0 <= figures["exposed_comm_ms"] <= figures["comm_ms"], config_id
            assert (figures["comm_ms"] > 0) == (row["impl"] != "local"), config_id  # local has none to time
    compared = {row["config"]: row for row in trace_overlap.compared(small_run)}
    naive = compared["w2 mlp/tiny naive"]
    assert naive["timeline"] == 0.0 and naive["trace"] == 0.0 and naive["trace_comm_ms"] > 0


def test_the_script_prints_each_configurations_two_figures(small_run, capsys):
    assert trace_overlap.main([str(small_run)]) == 0
    out = capsys.readouterr().out
    assert "w2 mlp/tiny bucketed: timeline " in out and ", trace " in out
    assert trace_overlap.main([str(small_run / "nothing")]) == 2
