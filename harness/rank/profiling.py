"""`--profile`: a few extra steps under torch.profiler, one Chrome trace per rank.

They run after the measured steps (profiling slows what it watches), and their files are named
rank<N>.json in one folder per configuration, as Holistic Trace Analysis expects.

Where the strategy's collectives are timed, the bucket timeline records the traced steps too,
and each trace carries, under TIMELINE_KEY, the communication the timeline measured over exactly
those steps: so the trace's own communication/compute overlap can be checked against ddpbench's
on the same steps (benchmarks/trace_overlap.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.analysis import overlap
from harness.comm_timeline import CommTimeline
from harness.config.grid import Configuration
from harness.measure.timing import make_step_timer
from harness.measure.training import forward_precision, step_batches, train_step
from harness.rank.dist import Session

PROFILE_SCHEDULE = {"wait": 1, "warmup": 1, "active": 3}
TIMELINE_KEY = "ddpbench_bucket_timeline"
"""The trace's top-level key for the timeline's figures over the traced steps (ms, this rank)."""


def profile(
    cfg: Configuration, session: Session, *, trace_dir: Path, timeline: CommTimeline | None = None, **step_parts
) -> str:
    """Run the profiled steps; returns the trace folder, relative to the run folder."""
    from torch.profiler import ProfilerActivity, schedule
    from torch.profiler import profile as profiler

    trace_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if session.device.type == "cuda" else [])
    total = sum(PROFILE_SCHEDULE.values())
    first_traced = total - PROFILE_SCHEDULE["active"]
    first_step = cfg.warmup + cfg.steps  # numbered after the measured steps
    path = trace_dir / f"rank{session.rank}.json"
    precision = forward_precision(cfg.dtype, session.device)
    timer = make_step_timer(session.device)
    with profiler(
        activities=activities,
        schedule=schedule(**PROFILE_SCHEDULE),
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(path)),
    ) as prof:
        for index in range(total):
            step = first_step + index
            *accumulated, batch = step_batches(step_parts["workload"], batch_size=cfg.batch_size, seed=cfg.seed,
                                               ranks=[session.rank], step=step, device=session.device,
                                               grad_accum=cfg.grad_accum)  # fmt: skip
            stamped = timeline if timeline is not None and index >= first_traced else None
            train_step(batch=batch, timer=timer, precision=precision, timeline=stamped, step=step,
                       accumulated=accumulated, **step_parts)  # fmt: skip
            if stamped is not None and index == total - 1:  # before prof.step() ends the trace
                stamped.end()
                phases = timer.collect()[first_traced:]
                figures = traced_communication(phases, stamped.rows(), first_step + first_traced)
                prof.add_metadata_json(TIMELINE_KEY, json.dumps(figures))
            prof.step()
    return str(trace_dir.relative_to(trace_dir.parent.parent))


def traced_communication(phases: list[dict[str, float]], collectives: list[dict[str, Any]], first: int) -> dict:
    """The timeline's communication over the traced steps `first`, `first + 1`, … (whose phases
    are `phases`, in order): totals in ms, as harness.analysis.overlap defines them."""
    by_step: dict[int, list[dict[str, Any]]] = {}
    for collective in collectives:
        if collective["step"] >= first:
            by_step.setdefault(collective["step"], []).append(collective)
    steps = [overlap.step_communication(timing, by_step.get(first + i, [])) for i, timing in enumerate(phases)]
    comm, exposed = [s["comm_ms"] for s in steps], [s["exposed_comm_ms"] for s in steps]
    return {
        "steps": [first + i for i in range(len(phases))],
        "comm_ms": sum(comm),
        "exposed_comm_ms": sum(exposed),
        "overlap_efficiency": overlap.overlap_efficiency(comm, exposed),
    }
