"""Communication time, exposed communication and overlap, from the bucket timeline and the phases.

Pure functions over one step of one rank, in ms from the step's start (docs/results.md defines them):

- communication time: how long at least one collective was in flight (the union of each
  collective's [launched, done]);
- exposed communication: the part of it during which no compute of the step ran;
- overlap efficiency: 1 − exposed / communication (HTA's communication–compute overlap).

Compute is the forward, the backward up to the moment its last gradient was ready, and the
optimizer step, less the time a blocking collective held them up (FSDP's all-gathers on the CPU
wait inside forward; naive's all-reduces make the GPU's compute stream wait). "Up to its last
gradient": DDP waits for its all-reduces inside backward, so the backward phase ends only when
communication does; the last bucket that became ready during
backward marks where gradient computation ended. A strategy that communicates after backward
(naive, flat) has no bucket ready in it, and its whole backward counts as compute.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Interval = tuple[float, float]

SPANS = "spans"
"""A step's timing key, where a phase ran more than once (gradient accumulation's K forwards and backwards,
interleaved): {phase: [(start, end) ms from the step's start, …]}, as the timer marked them (`phase_spans`)."""


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of `intervals` as disjoint, sorted intervals (empty ones dropped)."""
    result: list[Interval] = []
    for start, end in sorted((s, e) for s, e in intervals if e > s):
        if result and start <= result[-1][1]:
            result[-1] = (result[-1][0], max(result[-1][1], end))
        else:
            result.append((start, end))
    return result


def length(intervals: Iterable[Interval]) -> float:
    return sum(end - start for start, end in merged(intervals))


def minus(intervals: Sequence[Interval], removed: Sequence[Interval]) -> list[Interval]:
    """The parts of `intervals` outside `removed` (both taken as unions)."""
    left: list[Interval] = []
    cuts = merged(removed)
    for start, end in merged(intervals):
        for cut_start, cut_end in cuts:
            if cut_end <= start or cut_start >= end:
                continue
            if cut_start > start:
                left.append((start, cut_start))
            start = max(start, cut_end)
            if start >= end:
                break
        if start < end:
            left.append((start, end))
    return left


def clipped(intervals: Iterable[Interval], window: Interval) -> list[Interval]:
    low, high = window
    return [(max(s, low), min(e, high)) for s, e in intervals if min(e, high) > max(s, low)]


def phase_bounds(phases: dict[str, float]) -> dict[str, Interval]:
    """Each phase's [start, end] in ms from the step's start, from its duration (`<phase>_ms`)."""
    bounds, clock = {}, 0.0
    for phase in ("forward", "backward", "sync", "optimizer"):
        duration = phases.get(f"{phase}_ms") or 0.0
        bounds[phase] = (clock, clock + duration)
        clock += duration
    return bounds


def phase_spans(phases: dict[str, Any]) -> dict[str, list[Interval]]:
    """Where each phase ran in the step: the timer's spans where it marked them (a phase run once a micro-batch:
    F1 B1 F2 B2 … sync optimizer), else one span each, rebuilt from the durations (phase_bounds)."""
    rebuilt = {phase: [bounds] for phase, bounds in phase_bounds(phases).items()}
    return {**rebuilt, **{phase: [tuple(span) for span in spans] for phase, spans in phases.get(SPANS, {}).items()}}


def compute_intervals(
    phases: dict[str, float], ready_ms: Sequence[float], blocked: Sequence[Interval] = ()
) -> list[Interval]:
    """When the step computed: forward, backward up to its last gradient, optimizer, less `blocked`
    (the intervals of collectives that held compute up). Under gradient accumulation every micro-batch's forward
    and backward; the last backward, the one that synchronises, up to its last gradient."""
    spans = phase_spans(phases)
    *earlier, (last_start, _) = spans["backward"]
    backward = [*earlier, (last_start, gradients_end(phases, ready_ms))]
    return minus([*spans["forward"], *backward, *spans["optimizer"]], blocked)


def gradients_end(phases: dict[str, float], ready_ms: Sequence[float]) -> float:
    """When backward's last gradient was ready: the last collective ready inside the (last) backward, else its end."""
    backward_start, backward_end = phase_spans(phases)["backward"][-1]
    in_backward = [r for r in ready_ms if backward_start <= r <= backward_end]
    return max(in_backward) if in_backward else backward_end


def step_communication(phases: dict[str, float], collectives: Sequence[dict[str, float]]) -> dict[str, float]:
    """comm_ms, exposed_comm_ms and, of the exposed part, how much lay in the backward, forward and optimizer
    phases (`exposed_backward_ms`, `exposed_forward_ms`: a broadcast of buffers; `exposed_optimizer_ms`: ZeRO's
    of parameters; the rest lay in the sync phase), for one step of one rank.

    `collectives`: that step's timeline rows (ready_ms, launched_ms, done_ms). A collective without
    a completion stamp counts until the end of the sync phase, by which time every strategy has
    waited for all of its collectives."""
    spans = phase_spans(phases)
    in_flight, exposed = in_flight_and_exposed(phases, collectives)
    return {
        "comm_ms": length(in_flight),
        "exposed_comm_ms": length(exposed),
        **{f"exposed_{phase}_ms": sum(length(clipped(exposed, span)) for span in spans[phase])
           for phase in ("backward", "forward", "optimizer")},
    }  # fmt: skip


def in_flight_spans(phases: dict[str, float], collectives: Sequence[dict[str, Any]]) -> list[Interval]:
    """Each collective's (launched, done) in ms from the step's start. Without a completion stamp it counts
    until the end of the sync phase; a stamp after the step's end counts until that end: on the CPU the
    backend's completion callback runs on its own thread, and a loaded host runs it after the rank's wait
    returned and its optimizer finished (the step's parts then added up to more than the step)."""
    bounds = phase_bounds(phases)
    sync_end, step_end = bounds["sync"][1], bounds["optimizer"][1]
    return [
        (c["launched_ms"], min(step_end, c["done_ms"]) if c.get("done_ms") is not None else sync_end)
        for c in collectives
    ]


def in_flight_and_exposed(
    phases: dict[str, float], collectives: Sequence[dict[str, float]]
) -> tuple[list[Interval], list[Interval]]:
    """When at least one collective was in flight in the step, and when of that no compute ran (exposed), as
    intervals in ms from the step's start (`step_communication`'s figures; the bucket timeline draws them)."""
    spans = in_flight_spans(phases, collectives)
    blocked = [span for span, c in zip(spans, collectives, strict=True) if c.get("blocking")]
    in_flight = merged(spans)
    return in_flight, minus(in_flight, compute_intervals(phases, [c["ready_ms"] for c in collectives], blocked))


def overlap_efficiency(comm_ms: Iterable[float], exposed_ms: Iterable[float]) -> float | None:
    """1 − total exposed / total communication over the steps given (in [0, 1]); None without any."""
    comm, exposed = sum(comm_ms), sum(exposed_ms)
    return None if comm <= 0 else min(1.0, max(0.0, 1.0 - exposed / comm))


def exposure_ended_by(phases: dict[str, float], collectives: Sequence[dict[str, Any]]) -> list[float]:
    """Per collective, the ms of the step's exposed communication charged to it: each exposed span (no compute
    running) to the collective still in flight at its end that completed last, the one the step was waiting for
    (the last bucket's all-reduce after backward, typically). They add up to exposed_comm_ms."""
    spans = in_flight_spans(phases, collectives)
    _, exposed = in_flight_and_exposed(phases, collectives)
    charged = [0.0] * len(collectives)
    for start, end in exposed:
        open_at_end = [i for i, (launched, done) in enumerate(spans) if launched < end <= done]
        if open_at_end:
            # the last to complete; of those counted done alike (no stamps: the end of sync), the last launched
            charged[max(open_at_end, key=lambda i: (spans[i][1], spans[i][0]))] += end - start
    return charged
