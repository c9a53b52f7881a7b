"""A whole training run on each booking (a cluster × a GPU count): the wall-clock hours a fixed amount of work takes
there (`--train-samples`: samples, each booking stepping through them at its own samples a step), the GPU-hours it
holds and, at the user's price for a GPU-hour there, its cost; and the premium of the fastest booking over the
cheapest: the hours it saves and what it costs more. Where a booking's step is a range (measured on another GPU, an
own cost a CPU measured) each figure is one too, and a comparison of two bookings spans every corner of their ends.

Pure arithmetic over perfmodel.clusters.bookings' Booking: the run's time is its step × its steps, so it is as sure as
the step it rests on (`≥` where a full-size floor ranks the step) and no surer.
"""

from __future__ import annotations

import dataclasses
import itertools

from harness.perfmodel.clusters.bookings import Booking

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
