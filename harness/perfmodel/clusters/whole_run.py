"""A whole training run on each booking (a cluster × a GPU count): the wall-clock hours a fixed amount of work takes
there (`--train-samples`: samples, each booking stepping through them at its own samples a step), the GPU-hours it
holds and, at the user's price for a GPU-hour there, its cost; and the premium of the fastest booking over the
cheapest: the hours it saves and what it costs more. Where a booking's step is a range (measured on another GPU, an
own cost a CPU measured) each figure is one too, and a comparison of two bookings spans every corner of their ends.

Pure arithmetic over perfmodel.clusters.bookings' Booking: the run's time is its step × its steps, so it is as sure as
the step it rests on (`≥` where a full-size floor ranks the step) and no surer; and its words, which the console (one
cluster's or several's) and the what-if page share: what the run's figures count (`legend`), the fastest set against
the cheapest (`premium_words`).
"""

from __future__ import annotations

import dataclasses
import itertools

from harness.perfmodel.clusters.bookings import Booking, cheapest, fastest, fewest_gpu_hours

SECONDS_AN_HOUR = 3600.0


@dataclasses.dataclass(frozen=True)
class WholeRun:
    booking: Booking
    samples: float  # the work: samples trained, whatever the booking's samples a step
    steps: float  # the steps they take on this booking: samples ÷ (GPUs × a GPU's batch)
    hours: tuple[float, ...]  # wall-clock hours at each end of the booking's step (short end first)
    gpu_hours: tuple[float, ...]  # hours × GPUs, at each end
    cost: tuple[float, ...] = ()  # the user's price for a GPU-hour there × gpu_hours, at each end; () without one


def of_booking(b: Booking, samples: float, price: float | None = None) -> WholeRun | None:
    """`samples` trained on booking `b`: its steps × its step at each end; None where nothing fits there or its
    samples a step are not known (a booking made without its batch)."""
    if not b.fits or b.batch <= 0:
        return None
    steps = samples / (b.gpus * b.batch)
    hours = tuple(steps * ms / 1e3 / SECONDS_AN_HOUR for ms in b.step_ms)
    gpu_hours = tuple(h * b.gpus for h in hours)
    cost = tuple(price * h for h in gpu_hours) if price is not None else ()
    return WholeRun(b, samples, steps, hours, gpu_hours, cost)


def of_bookings(bookings: list[Booking], samples: float, prices: dict[str, float] | None = None) -> list[WholeRun]:
    """Each booking's run, in the bookings' order (those without one left out); `prices` keyed by cluster name."""
    runs = (of_booking(b, samples, (prices or {}).get(b.cluster)) for b in bookings)
    return [run for run in runs if run is not None]


@dataclasses.dataclass(frozen=True)
class Premium:
    """What the faster run buys over the cheaper one, at every corner of their ends: the least and the most."""

    hours_saved: tuple[float, float]  # the cheaper run's hours minus the faster's
    extra: tuple[float, float]  # the faster run's cost minus the cheaper's (GPU-hours where no price is given)
    extra_share: tuple[float, float]  # `extra` over the cheaper run's cost (or GPU-hours)
    priced: bool  # `extra` is in the user's price units, not GPU-hours


def premium(faster: WholeRun, cheaper: WholeRun) -> Premium:
    """The faster run against the cheaper: hours saved and the extra cost (GPU-hours without prices), each the least
    and the most over the corners of the two bookings' ends; two bookings of one cluster move together (their steps
    rest on its one step), so they pair end by end."""
    priced = bool(faster.cost and cheaper.cost)
    spend = (lambda run: run.cost) if priced else (lambda run: run.gpu_hours)
    if faster.booking.cluster == cheaper.booking.cluster:
        corners = [(k, k) for k in range(max(len(faster.hours), len(cheaper.hours)))]
    else:
        corners = list(itertools.product(range(len(faster.hours)), range(len(cheaper.hours))))

    def at(values: tuple[float, ...], k: int) -> float:
        return values[min(k, len(values) - 1)]

    saved = [at(cheaper.hours, j) - at(faster.hours, k) for k, j in corners]
    extra = [at(spend(faster), k) - at(spend(cheaper), j) for k, j in corners]
    share = [at(spend(faster), k) / at(spend(cheaper), j) - 1 for k, j in corners]
    return Premium((min(saved), max(saved)), (min(extra), max(extra)), (min(share), max(share)), priced)


def legend(runs: list[WholeRun], samples: float, *, priced: bool) -> str:
    """'run: 6.4M samples (--train-samples), 400,000 steps at 16 samples a step, 100,000 at 64; run h: those steps ×
    the step; run cost: your GPU-hour price × GPUs × run h': what the run's columns count, and from what."""
    steps = dict(sorted({run.booking.gpus * run.booking.batch: run.steps for run in runs}.items()))
    each = ", ".join(f"{counted(n)} {'steps ' if k == 0 else ''}at {size:,}{' samples a step' if k == 0 else ''}"
                     for k, (size, n) in enumerate(steps.items()))  # fmt: skip
    cost = "; run cost: your GPU-hour price × GPUs × run h" if priced else ""
    return (
        f"run: {amount_text(samples)} samples (--train-samples), {each}; run h: those steps × the step (the steps "
        f"alone: no start-up, checkpoints or evaluation), as sure as it{cost}"
    )


def premium_words(bookings: list[Booking], runs: list[WholeRun], samples: float,
                  prices: dict[str, float] | None) -> str:  # fmt: skip
    """'the run of 6.4M samples: fastest dgx-h100 × 32 GPUs, ≥0.168 h for ≥20.9; cheapest dgx-h100 × 8 GPUs, ≥0.58
    h for ≥18.1: the fastest saves ≥0.41 h for ≥2.8 more (+15%)': the run's figures of the fastest and the cheapest
    (the fewest GPU-hours without prices, its extra in GPU-hours), each where its ranking is decided; '' where the
    fastest is open."""
    by_id = {id(run.booking): run for run in runs}
    second = cheapest(bookings, prices) if prices else fewest_gpu_hours(bookings)
    ranked = [(fastest(bookings), lambda run: run.hours[0]), (second, lambda run: (run.cost or run.gpu_hours)[0])]
    known = [r.decided and bool(r.best) and all(id(b) in by_id for b in r.best) for r, _ in ranked]
    if not known[0]:
        return ""
    fast, cheap = (min((by_id[id(b)] for b in r.best), key=key) if ok else None
                   for (r, key), ok in zip(ranked, known, strict=True))  # fmt: skip
    unit, least = ("", "cheapest") if prices else (" GPU-h", "fewest GPU-hours")

    def figures(run: WholeRun) -> str:
        mark = "≥" if run.booking.at_least else ""
        spent = f"{mark}{span(run.cost)}" if prices else f"{mark}{span(run.gpu_hours)} GPU-h"
        return f"{run.booking.cluster} × {run.booking.gpus} GPUs, {mark}{span(run.hours)} h for {spent}"

    said = f"the run of {amount_text(samples)} samples: fastest {figures(fast)}"
    if cheap is None:
        return f"{said}; the {least} open (above): each booking's run is in the table"
    if any(b is fast.booking for b in ranked[1][0].best):  # within the cheapest's tie: no premium to pay
        return f"{said}, also the {least}" + " (tied)" * (fast is not cheap)
    more = premium(fast, cheap)
    share = "–".join(dict.fromkeys(f"{v:+.0%}" for v in more.extra_share))
    floored = fast.booking.at_least or cheap.booking.at_least  # floors' difference: neither a floor nor a ceiling
    floors = " (at the full size's floors: the difference is no bound either way)" if floored else ""
    return (
        f"{said}; {least} {figures(cheap)}: the fastest saves "
        f"{span(more.hours_saved)} h for {span(more.extra)}{unit} more ({share}){floors}"
    )


def amount_text(value: float) -> str:
    """'6.4M', '2B', '51,200': a count as typed, with a decimal suffix where it is a round one."""
    for suffix, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= size and (value / size) == round(value / size, 3):
            return f"{value / size:g}{suffix}"
    return f"{value:,.0f}"


def counted(value: float) -> str:
    """A figure read by eye: three digits, no exponent ('0.287', '17.4', '2,437')."""
    return f"{value:.3g}" if value < 100 else f"{value:,.0f}"


def span(values: tuple[float, ...], text=counted) -> str:
    """'122.2–255.6': the least to the most, where the ends differ."""
    return "–".join(dict.fromkeys(text(v) for v in sorted(values)))
