"""`predict --json FILE`: the answer of `predict --cluster … --run …` as one record a script reads instead of the
console: every booking (a cluster × a GPU count) with what it books, its step, throughput, GPU-hours and, with
--train-samples, the whole run's hours and cost; then the fastest, the fewest GPU-hours and (at --gpu-hour-price's
prices) the cheapest, each decided or open and, where open, on which cluster's step. The figures are the bookings'
(perfmodel.clusters.bookings), the same the console's table prints; a range is [least, most], one figure twice.
The fields are listed, with their units, in docs/output.md (predict --json); SCHEMA_VERSION grows when one changes.
"""

from __future__ import annotations

from typing import Any

from harness.analysis import roles
from harness.perfmodel.clusters import whole_run
from harness.perfmodel.clusters.bookings import (
    COMM_BOUND,
    Booking,
    Ranking,
    booked_cap,
    cheapest,
    fastest,
    fewest_gpu_hours,
)

SCHEMA_VERSION = 1

DDP_STEP_MODEL = "DDP"
"""A booking made without a choice of strategy books DDP's step model at its cap ('DDP at 25 MiB'): torch's DDP as
shipped, the reference strategy (`stock`), named as the strategies name it. A choice books them by their own names."""


def answer(bookings: list[Booking], *, tokens: bool, prices: dict[str, float] | None = None,
           samples: float | None = None, verdict: str = "", why_none: str = "") -> dict[str, Any]:  # fmt: skip
    """The record `predict --json` writes: `verdict`, the console's last line on the bookings compared ('' with one
    cluster, which compares none); `why_none`, why no booking has a step (a CPU run without --local-step-ms)."""
    runs = {id(run.booking): run for run in whole_run.of_bookings(bookings, samples, prices)} if samples else {}
    rankings = {"fastest": fastest(bookings), "fewest_gpu_hours": fewest_gpu_hours(bookings)}
    rankings["cheapest"] = cheapest(bookings, prices) if prices else None
    judged = [r for r in rankings.values() if r is not None and r.best]
    return _no_nan(
        {
            "schema_version": SCHEMA_VERSION,
            "step_known": any(b.fits for b in bookings),
            "why_none": why_none,
            "unit": "tokens" if tokens else "samples",
            "work": "1B tokens" if tokens else "1M samples",
            "train_samples": samples,
            "prices": prices or None,
            "bookings": [_booking(b, runs.get(id(b)), prices) for b in bookings],
            **{name: _ranking(r) if r is not None else None for name, r in rankings.items()},
            "decided": bool(judged) and all(r.decided for r in judged),
            "verdict": verdict,
        }
    )


def _no_nan(value: Any) -> Any:
    """A figure not known (NaN) as JSON's null: strict JSON has no NaN, and a script's parser may refuse it."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {key: _no_nan(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


def _span(values: tuple[float, ...]) -> list[float] | None:
    """[least, most] of a figure at a step's two ends (the same twice where it is one figure); None where none."""
    return [min(values), max(values)] if values else None


def _booking(b: Booking, run: whole_run.WholeRun | None, prices: dict[str, float] | None) -> dict[str, Any]:
    strategies = [pick.split(" at ")[0] for pick in b.book.split(" or ")] if b.book else []
    exposed = b.exposed_ms if b.exposed_ms == b.exposed_ms else None  # NaN: not known
    return {
        "cluster": b.cluster,
        "gpus": b.gpus,
        "nodes": b.nodes,
        "fits": b.fits,
        "book": b.book,
        "strategies": [roles.reference_name() if s == DDP_STEP_MODEL else s for s in strategies],
        "bucket_cap_mb": booked_cap(b.book),
        "tied_with": list(b.tied),
        "long_end_books": b.other_end or None,
        "step_ms": _span(b.step_ms),
        "step_at_least": b.at_least,
        "step_bounded": b.bounded,
        "peak_gib_per_rank": list(b.peak_gib) or None,
        "gpu_capacity_gib": b.capacity_gib or None,
        "exposed_comm_ms": exposed,
        "comm_bound": exposed / b.step_ms[0] > COMM_BOUND if exposed is not None and b.step_ms else None,
        "batch_per_gpu": b.batch or None,
        "per_s": _span(b.per_s),
        "gpu_hours_per_work": _span(b.gpu_hours),
        "cost_per_work": _span(tuple(prices[b.cluster] * h for h in b.gpu_hours)) if prices else None,
        "run_hours": _span(run.hours) if run else None,
        "run_gpu_hours": _span(run.gpu_hours) if run else None,
        "run_cost": _span(run.cost) if run and run.cost else None,
    }


def _ranking(r: Ranking) -> dict[str, Any]:
    def named(best: list[Booking]) -> list[dict[str, Any]]:
        return [{"cluster": b.cluster, "gpus": b.gpus} for b in best]

    return {
        "best": named(r.best),
        "decided": r.decided and bool(r.best),  # nothing booked: nothing decided
        "open_on": list(r.open_on),
        "best_at_short_end": named(r.at_ends[0]) if r.open_on else None,
        "best_at_long_end": named(r.at_ends[1]) if r.open_on else None,
    }
