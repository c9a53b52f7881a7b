"""Communication/compute overlap read from a run's torch.profiler traces, next to the overlap its
bucket timeline measured over the same steps: an independent check of `overlap_efficiency`.

    python benchmarks/trace_overlap.py RUN_DIR      (a run made with --profile --bucket-timeline)

The trace's overlap is the share of communication time during which some compute ran (HTA's
communication/compute overlap), as a ratio of totals over every rank's trace. What counts as what:

- GPU traces: communication is NCCL kernels and, for gloo (which stages CUDA tensors through host
  memory on streams of its own), each collective from its copy to the host to the end of its
  copy back; compute is every other kernel. All on the GPU's clock.
- CPU traces: communication is gloo's annotations; compute is the operators of the training
  thread (the one that holds the ProfilerStep annotations), less the collectives' own calls.

Each trace carries the timeline's figures over exactly its traced steps (harness/rank/profiling.py),
so the two differ only in how they count compute: the timeline counts phases (forward, backward up
to its last gradient, optimizer), the trace counts operators or kernels, so gaps between them
(Python, launches) count as compute only in the timeline. The configuration's row measures other
steps (the measured window), and is shown for reference.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a plain checkout

from harness.analysis.overlap import Interval, length, merged, minus
from harness.rank.profiling import TIMELINE_KEY
from harness.results import store

COLLECTIVE_CALL = "c10d::"
"""The operators that launch (and, when blocking, wait for) a collective: communication, not compute."""


@dataclasses.dataclass(frozen=True)
class TraceOverlap:
    comm_us: float
    hidden_us: float

    @property
    def share(self) -> float | None:
        return self.hidden_us / self.comm_us if self.comm_us > 0 else None

    def __add__(self, other: TraceOverlap) -> TraceOverlap:
        return TraceOverlap(self.comm_us + other.comm_us, self.hidden_us + other.hidden_us)


def _span(event: dict) -> Interval:
    start = float(event["ts"])
    return start, start + float(event.get("dur", 0.0))


def trace_intervals(trace: dict) -> tuple[list[Interval], list[Interval]]:
    """(communication, compute) intervals of one rank's Chrome trace, in µs."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    if kernels:
        return _gpu_intervals(events, kernels)
    return [_span(e) for e in events if str(e.get("name", "")).startswith("gloo:")], _training_thread_ops(events)


def _gpu_intervals(events: list[dict], kernels: list[dict]) -> tuple[list[Interval], list[Interval]]:
    """On the GPU's own clock: NCCL kernels, and each gloo collective's staging, from its copy to
    the host to the end of its copy back (on a stream of its own), are communication; every other
    kernel is compute. gloo's host-side annotations are left out: they open as soon as the host
    hands a bucket over, ahead of the GPU."""
    is_nccl = [("nccl" in e.get("name", "").lower()) for e in kernels]
    busy: Counter = Counter()
    for event, nccl in zip(kernels, is_nccl, strict=True):
        if not nccl:
            busy[_stream(event)] += float(event.get("dur", 0.0))
    compute_stream = busy.most_common(1)[0][0] if busy else None
    copies = [e for e in events if e.get("cat") == "gpu_memcpy" and _stream(e) != compute_stream]
    comm = [_span(e) for e, nccl in zip(kernels, is_nccl, strict=True) if nccl] + staged_spans(copies)
    compute = [_span(e) for e, nccl in zip(kernels, is_nccl, strict=True) if not nccl]
    return comm, compute


def staged_spans(copies: list[dict]) -> list[Interval]:
    """Per stream, from a copy to the host (DtoH) to the end of the next copy back (HtoD): one
    collective staged through host memory, the host's part (gloo's all-reduce) included."""
    spans: list[Interval] = []
    by_stream: dict = {}
    for event in sorted(copies, key=lambda e: float(e["ts"])):
        by_stream.setdefault(_stream(event), []).append(event)
    for stream_copies in by_stream.values():
        opened: float | None = None
        for event in stream_copies:
            start, end = _span(event)
            if "DtoH" in event.get("name", "") and opened is None:
                opened = start
            elif "HtoD" in event.get("name", "") and opened is not None:
                spans.append((opened, end))
                opened = None
    return spans


def _stream(event: dict):
    return (event.get("args") or {}).get("stream", event.get("tid"))


def _training_thread_ops(events: list[dict]) -> list[Interval]:
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    if not steps:
        return []
    thread = (steps[0].get("pid"), steps[0].get("tid"))
    return [
        _span(e)
        for e in events
        if e.get("cat") == "cpu_op"
        and (e.get("pid"), e.get("tid")) == thread
        and not str(e.get("name", "")).startswith(COLLECTIVE_CALL)
    ]


def overlap(comm: list[Interval], compute: list[Interval]) -> TraceOverlap:
    """How much communication time there was, and how much of it ran while compute did."""
    total = length(comm)
    return TraceOverlap(total, total - length(minus(merged(comm), compute)))


def run_overlap(trace_dir: Path) -> tuple[TraceOverlap, TraceOverlap | None]:
    """Over every rank's trace (rank<N>.json) of one configuration, as ratios of totals: the trace's
    overlap, and the bucket timeline's over the same steps (None where the trace carries none)."""
    traced, timed = TraceOverlap(0.0, 0.0), TraceOverlap(0.0, 0.0)
    carried = True
    for path in sorted(trace_dir.glob("rank*.json")):
        trace = json.loads(path.read_text())
        traced += overlap(*trace_intervals(trace))
        figures = trace.get(TIMELINE_KEY)
        carried = carried and figures is not None
        if figures is not None:
            comm = figures["comm_ms"] * 1e3
            timed += TraceOverlap(comm, comm - figures["exposed_comm_ms"] * 1e3)
    return traced, timed if carried and traced.comm_us > 0 else None


def compared(run_dir: Path) -> list[dict]:
    """Per profiled configuration with a measured overlap: the row's and the trace's."""
    import pandas as pd

    frame = store.read_configs(run_dir)  # migrated and merged as every reader sees it
    rows = []
    for row in frame.itertuples():
        if row.status != "ok" or not isinstance(row.trace_dir, str) or pd.isna(row.overlap_efficiency):
            continue
        traced, timed = run_overlap(run_dir / row.trace_dir)
        rows.append({
            "config": f"w{row.world_size} {row.workload}/{row.size} {row.impl}",
            "world_size": int(row.world_size),
            "backend": row.backend,
            "row": float(row.overlap_efficiency),
            "timeline": None if timed is None else timed.share,
            "trace": traced.share,
            "timeline_comm_ms": None if timed is None else timed.comm_us / 1e3,
            "trace_comm_ms": traced.comm_us / 1e3,
        })  # fmt: skip
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "configs").is_dir():
        print("usage: python benchmarks/trace_overlap.py RUN_DIR (a results/<run_id>/ folder)", file=sys.stderr)
        return 2
    rows = compared(Path(argv[0]))
    if not rows:
        print("trace_overlap: no configuration has both a trace and a measured overlap "
              "(run with --profile --bucket-timeline)", file=sys.stderr)  # fmt: skip
        return 1
    print("overlap over the traced steps: bucket timeline vs trace (communication time of each), "
          "and the row's over its measured window")  # fmt: skip
    for row in rows:
        print(f"  {row['config']}: timeline {figure(row['timeline'])} ({figure(row['timeline_comm_ms'], 'ms')}), "
              f"trace {figure(row['trace'])} ({row['trace_comm_ms']:.1f} ms); row {row['row']:.2f}")  # fmt: skip
    return 0


def figure(value: float | None, unit: str = "") -> str:
    if value is None:
        return "none"
    return f"{value:.1f} {unit}" if unit else f"{value:.2f}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
