"""Why a configuration is slower than `local`: its step minus the baseline's at the same world size,
taken apart into measured parts, and the rank the others wait for.

Per step and rank (from the phases and the bucket timeline, harness.analysis.overlap):

- compute: forward, backward up to its last gradient, optimizer, less blocking collectives;
- exposed communication: collectives in flight with no compute running;
- waiting: the part of that exposed time during which a collective of this rank was in flight only
  because another rank launched the same collective later;
- the rest: time in the step that is neither compute nor communication (the strategy's own work
  outside both: DDP copying buckets back, an optimizer wrapper, hooks).

The parts of a step add up to it exactly (step = compute + exposed + rest). Per configuration, over
its measured steps, as the rank that waited most in each step sees it (waiting_view):

    gap = step − baseline step = exposed (not waiting) + waiting + slower compute + rest + residual

where slower compute is compute − the baseline's compute, and the residual is the step time (the
slowest rank's step) beyond the step of the rank that waited most, less what the baseline's step holds
beyond its compute (its own sync phase and gaps): named, never hidden. Small where the ranks keep pace;
on a loaded host a rank the scheduler holds after the last transfer ends its step late by the hold, which
no other rank's step holds, and the residual carries it (15 % of a 13 ms step under 8 busy loops on 2 cores).

**How late a rank launched**, without a common clock across ranks (none exists across nodes, nor
between GPUs' event clocks): an all-reduce completes on every rank within its last transfer, so a
rank that launched a collective early waits for the latest launcher; its collective's time in flight
exceeds the latest launcher's by that wait. So per collective (step, bucket), rank r waited
`in_flight(r) − min over ranks of in_flight`, and the rank with the shortest time in flight launched
last, late by the longest wait. Pure functions: the worker's rank 0 calls them with every rank's rows;
slow_rank_words says the rank named, or how near one came, for why.lines (the console and the run page).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from harness.analysis.overlap import (
    clipped,
    compute_intervals,
    in_flight_spans,
    length,
    merged,
    minus,
    phase_bounds,
)

LATE_MIN_STEPS = 10
"""A slow rank is named only from at least this many measured steps: with fewer, chance alone makes one
rank last in most of them (at 2 ranks and 4 steps, in 3 of 4 with a chance of 5 in 8)."""
LATE_STEPS_SHARE = 0.95
"""…last in at least this share of them: chance alone, at 2 ranks and 10 steps, makes one rank last in all
10 0.2 % of the time. Ranks sharing a CPU's cores fall into turns (one computes while the other waits, then
faster): quiet 2-core runs showed a rank late by 10-20 % of the step in 75-90 % of steps with no fault at
all; a straggler is late in every step (docs/statistics.md)."""
LATE_MARGIN = 0.15
"""…and late by at least this share of the step (median over the steps it was last in)."""
LATE_FLOOR_MS = 1.0
"""…and by at least this much (below it, scheduling noise on a loaded CPU)."""
CHANCE = 0.05
"""…and, for unnamed_rank_words only, last in more steps than chance gives the most-often-last of world_size
ranks this often where each rank is last 1/world_size of the time (one rank's binomial tail times world_size,
Bonferroni's, since the rank tested is the one last most often: 9 of 10 steps at 2 ranks, 15 of 20; 7 of 10 at
4): a loaded host's quiet run had 'rank 1 last in 50% of steps, 73.6 ms late' (19 % of its step), a coin's toss,
not a near miss."""
SMALL_PART = 0.10
"""A part under this share of the gap is not worth a word in the sentence."""


def step_parts(
    phases: dict[str, float], collectives: Sequence[dict[str, Any]], waits: dict[tuple[int, int], float]
) -> dict:
    """One step of one rank: compute_ms, exposed_comm_ms, waiting_ms (exposed time in which a collective
    was in flight only for a later launch elsewhere: `waits` maps the collective's (bucket, time) key, as
    `occurrences` numbers it, to how long it waited, counted from its launch), rest_ms (neither compute nor
    communication)."""
    bounds = phase_bounds(phases)
    step_end = bounds["optimizer"][1]
    spans = in_flight_spans(phases, collectives)
    blocked = [span for span, c in zip(spans, collectives, strict=True) if c.get("blocking")]
    compute = compute_intervals(phases, [c["ready_ms"] for c in collectives], blocked)
    in_flight = merged(spans)
    exposed = minus(in_flight, compute)
    keys = occurrences(collectives)
    waiting_spans = [
        (c["launched_ms"], c["launched_ms"] + waits.get(key[1:], 0.0)) for c, key in zip(collectives, keys, strict=True)
    ]
    waiting = length(clipped(minus(exposed, minus(exposed, merged(waiting_spans))), (0.0, step_end)))
    busy = merged([*compute, *in_flight])
    return {
        "compute_ms": length(compute),
        "exposed_comm_ms": length(exposed),
        "waiting_ms": waiting,
        "rest_ms": max(0.0, step_end - length(clipped(busy, (0.0, step_end)))),
    }


def occurrences(rows: Sequence[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """Each collective's (step, bucket, time): the how-many-th launch of that bucket in its step, in launch order. One
    bucket travels several times a step (FSDP all-gathers a unit in every forward and backward: under gradient
    accumulation once a micro-batch), and every rank launches them in the same order, so this key matches one
    collective across ranks where (step, bucket) kept only the last."""
    seen: dict[tuple[int, int], int] = {}
    keys = []
    for row in rows:
        slot = (row["step"], row["bucket"])
        seen[slot] = seen.get(slot, -1) + 1
        keys.append((*slot, seen[slot]))
    return keys


def waits_per_rank(collectives_by_rank: Sequence[Sequence[dict[str, Any]]]) -> list[dict[tuple[int, int, int], float]]:
    """Per rank, {(step, bucket, time) (`occurrences`): how long its collective waited for the latest launcher}: its
    time in flight less the shortest time in flight any rank had for that collective. A collective some rank
    did not complete (no stamp), or that not every rank ran, waits for nothing."""
    flights: dict[tuple[int, int, int], dict[int, float]] = {}
    for rank, rows in enumerate(collectives_by_rank):
        for row, key in zip(rows, occurrences(rows), strict=True):
            if row.get("done_ms") is not None:
                flights.setdefault(key, {})[rank] = row["done_ms"] - row["launched_ms"]
    ranks = len(collectives_by_rank)
    waits: list[dict[tuple[int, int, int], float]] = [{} for _ in range(ranks)]
    for key, by_rank in flights.items():
        if len(by_rank) == ranks:
            shortest = min(by_rank.values())
            for rank, flight in by_rank.items():
                waits[rank][key] = flight - shortest
    return waits


def late_per_step(waits: Sequence[dict[tuple[int, int, int], float]]) -> dict[int, tuple[int, float]]:
    """Per step, (the rank that launched last, by how much): the rank that kept the others waiting
    longest in that step, and that longest wait (over its collectives)."""
    by_step: dict[int, dict[int, float]] = {}
    for key in set().union(*(w.keys() for w in waits)) if waits else ():
        step = key[0]
        if not all(key in w for w in waits):
            continue
        shortest_rank = min(range(len(waits)), key=lambda r: waits[r][key])
        longest_wait = max(w[key] for w in waits)
        slot = by_step.setdefault(step, {})
        slot[shortest_rank] = max(slot.get(shortest_rank, 0.0), longest_wait)
    return {step: max(late.items(), key=lambda item: item[1]) for step, late in by_step.items()}


LAST_RANK = ("last_rank", "last_rank_late_ms", "last_rank_share")


def last_rank(late: dict[int, tuple[int, float]], *, world_size: int) -> dict[str, Any]:
    """The rank that launched last in the most steps (ties: the later in sum), its median lateness over those
    steps and their share, named slow or not: where slowest_rank names none, how near one came."""
    if world_size < 2 or not late:
        return dict.fromkeys(LAST_RANK)
    counts: dict[int, list[float]] = {}
    for rank, lateness in late.values():
        counts.setdefault(rank, []).append(lateness)
    rank, latenesses = max(counts.items(), key=lambda item: (len(item[1]), sum(item[1])))
    return {"last_rank": rank, "last_rank_late_ms": statistics.median(latenesses),
            "last_rank_share": len(latenesses) / len(late)}  # fmt: skip


def slowest_rank(late: dict[int, tuple[int, float]], step_ms: float, *, world_size: int) -> dict[str, Any]:
    """The rank the others wait for, or none: from at least LATE_MIN_STEPS steps, last in at least
    LATE_STEPS_SHARE of them, late by at least LATE_MARGIN of the step (and LATE_FLOOR_MS) in the median of
    those steps. A balanced run, where every rank is last about 1/world_size of the time, names none."""
    empty = {"slowest_rank": None, "slowest_rank_late_ms": None, "slowest_rank_share": None}
    if world_size < 2 or len(late) < LATE_MIN_STEPS or not step_ms:
        return empty
    found = last_rank(late, world_size=world_size)
    share, typical = found["last_rank_share"], found["last_rank_late_ms"]
    if share >= LATE_STEPS_SHARE and typical >= max(LATE_MARGIN * step_ms, LATE_FLOOR_MS):
        return {"slowest_rank": found["last_rank"], "slowest_rank_late_ms": typical, "slowest_rank_share": share}
    return empty


def _value(row: Any, column: str) -> Any:
    """A row's (a dict's or a pandas row's) value, None where it is missing or NaN."""
    value = row.get(column) if hasattr(row, "get") else None
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def slow_rank_words(row: Any) -> str | None:
    """'rank 1 is late by 18.0 ms per step in 91% of steps: it launches its collectives later; the others
    wait for it'; where none is named, unnamed_rank_words."""
    rank = _value(row, "slowest_rank")
    if rank is None:
        return unnamed_rank_words(row)
    late, share = _value(row, "slowest_rank_late_ms") or 0.0, _value(row, "slowest_rank_share") or 0.0
    return (f"rank {int(rank)} is late by {late:.1f} ms per step in {share:.0%} of steps: it launches its "
            "collectives later (its work before them is slower); the others wait for it")  # fmt: skip


def unnamed_rank_words(row: Any) -> str | None:
    """Why no rank is named slow where the rank last most often (last_rank) was late by a slow rank's margin,
    in more steps than chance makes one rank last (CHANCE): its share fell short (or the steps were too few).
    None where no rank was that late, or that often: a run whose fault held rank 1 30 ms, last by 83.6 ms (22 % of
    the step) in 9 of 10 steps, said nothing of rank 1 at all."""
    if _value(row, "slowest_rank") is not None:
        return None
    rank, late, share = (_value(row, column) for column in LAST_RANK)
    step, steps, world = _value(row, "step_ms_median"), _value(row, "steps"), _value(row, "world_size")
    if rank is None or late is None or share is None or not step or late < max(LATE_MARGIN * step, LATE_FLOOR_MS):
        return None
    if not steps or not world or _chance_any_of(round(share * steps), int(steps), int(world)) >= CHANCE:
        return None
    return (f"no rank named slow, though rank {int(rank)} launched last in {share:.0%} of steps, a median "
            f"{late:.1f} ms late ({late / step:.0%} of the median step): a slow rank is last in "
            f"{LATE_STEPS_SHARE:.0%} of {LATE_MIN_STEPS} steps or more (docs/statistics.md), and ranks taking "
            "turns on shared cores come near it too: more --steps on a quieter machine tell them apart")  # fmt: skip


def _chance_any_of(last: int, steps: int, world: int) -> float:
    """At most the chance that some rank of `world` is last in `last` of `steps` steps or more, each last at random.

    The rank tested is the one last most often, so one rank's binomial tail undercounts chance by up to `world`
    times (simulated: false near misses in 7.5-15 % of balanced 4-rank runs, 16-24 % at 8): Bonferroni's bound,
    world times one rank's tail, is exact at 2 ranks (two ranks cannot both be last in over half the steps)."""
    from scipy import special  # one rank's binomial tail, P(last or more of steps), as stats.py takes scipy's

    if last <= 0:
        return 1.0
    return min(1.0, world * float(special.bdtrc(last - 1, steps, 1 / world)))


UNTOLD_NEXT = (
    ": a quieter machine would tell (on a busy one, ranks that wait in collectives get the cores back sooner than"
    " the baseline's, which never wait), with 6 repeats or more (--repeats 6: launches run in pairs, an order then"
    " its reverse, so at an even count every configuration's mean place is the middle; this sentence speaks of the"
    " median launch)"
)
"""What would tell the cost of a configuration faster than the baseline though it communicates (`why.sentence`,
`offset_line`): one launch a configuration on a busy CPU read bucketed's step 0.53-1.56x local's (mlp/small, 2
ranks, load 7-16, 24 launches), and the geometric mean of 4 repeats 0.93-1.10x."""

GAP_PARTS = ("gap_exposed_comm_ms", "gap_waiting_ms", "gap_slower_compute_ms", "gap_rest_ms", "gap_residual_ms")


def decompose(view: Sequence[dict[str, float]], baseline: dict[str, float] | None, *, step_ms: float | None = None
              ) -> dict[str, float | None]:  # fmt: skip
    """The gap over the baseline, taken apart: `view` holds one rank's row per measured step (step_ms and
    step_parts' figures: the rank that waited most, waiting_view), `baseline` the baseline configuration's
    mean step and compute at the same world size and setup ({"step_ms", "compute_ms"}), `step_ms` the
    configuration's mean step (the view's own by default). Means over the steps, so that the parts add up;
    the residual is the step's difference between ranks less the baseline's time beyond its compute."""
    empty = dict.fromkeys(("gap_ms", *GAP_PARTS))
    if not view or baseline is None or baseline.get("step_ms") is None or baseline.get("compute_ms") is None:
        return empty
    mean = {key: statistics.fmean(step[key] for step in view)
            for key in ("step_ms", "compute_ms", "exposed_comm_ms", "waiting_ms", "rest_ms")}  # fmt: skip
    parts = {
        "gap_exposed_comm_ms": mean["exposed_comm_ms"] - mean["waiting_ms"],
        "gap_waiting_ms": mean["waiting_ms"],
        "gap_slower_compute_ms": mean["compute_ms"] - baseline["compute_ms"],
        "gap_rest_ms": mean["rest_ms"],
    }
    gap = (mean["step_ms"] if step_ms is None else step_ms) - baseline["step_ms"]
    return {"gap_ms": gap, **parts, "gap_residual_ms": gap - sum(parts.values())}


def waiting_view(steps: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per measured step, the row of the rank that waited most for the others (where none waited, the
    fastest rank's: the one that would have waited). Every rank's step is the step time within the last
    transfer, since each waits in the same collectives (less a hold after it, the residual's); but the
    waits are seen only from the ranks that waited: the late rank's own
    view shows the same gap as its slower compute. A straggler's cost is told as the others' wait, and
    the straggler is named beside it (slowest_rank). The baseline's ranks never wait, so its view is its
    fastest rank's, as a synchronising strategy's waiting rank is the one that computed fastest: the
    slowest rank's instead read the baseline's compute 1.05-1.90x its fastest's (median 1.33; mlp/small, 2
    ranks, 25 launches at load 7-16) against a strategy's fastest, a faster compute that was the ranks' spread."""
    chosen: dict[int, dict[str, Any]] = {}
    for row in steps:
        if row["warmup"]:
            continue
        key = (row.get("waiting_ms") or 0.0, -row["step_ms"])
        held = chosen.get(row["step"])
        if held is None or key > (held.get("waiting_ms") or 0.0, -held["step_ms"]):
            chosen[row["step"]] = row
    return [chosen[step] for step in sorted(chosen)]
