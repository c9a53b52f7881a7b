"""Steps known only between two ends, and a ranking decided only where it holds at every corner of them: a step
measured on another GPU than a cluster's (config.precision.step_bounds; the bookings compared, clusters/bookings.py),
and an own cost a CPU measured (FSDP2's, ZeRO-1's), which a GPU's step given by --local-step-ms may carry none of or
all of, scaled (the choice, choice.py). Each bounded quantity at its short end or its long end, independently: a
step grows with each, so whether one step is below another (times a tie's band) is the same over the whole box of
values where it is the same at every corner of it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from harness.analysis import agreement

SHORT, LONG = 0, -1
"""The two ends of a bound, as indices into a tuple of values at each end."""

T = TypeVar("T")

OWN_COST_OF = {"FSDP2": "FSDP", "ZeRO-1": "ZeRO"}
"""Whose own cost bounds a step model's step, as the console names it ("FSDP's own cost")."""


def corners(keys: Iterable[Hashable]) -> list[dict]:
    """Every corner of the bounds `keys` name (each at SHORT or LONG), the all-short one first, the all-long one
    last; one corner, {}, where nothing is bounded."""
    keys = list(dict.fromkeys(keys))
    return [dict(zip(keys, ends, strict=True)) for ends in itertools.product((SHORT, LONG), repeat=len(keys))]


def at_every_corner(keys: Iterable[Hashable], judge: Callable[[dict], T]) -> tuple[list[T], bool]:
    """`judge` at every corner of `keys`' bounds (`corners`' order), and whether it says the same at each: decided."""
    said = [judge(at) for at in corners(keys)]
    return said, all(each == said[0] for each in said)


def own_cost_open(models: Iterable[str]) -> str:
    """'open until FSDP's own cost is measured on a GPU': what a choice that flips inside its own-cost bounds waits
    on (FSDP2's, ZeRO-1's: a CPU's own cost is no GPU's)."""
    whose = [OWN_COST_OF.get(model, model) for model in models]
    costs = "own costs are" if len(whose) > 1 else "own cost is"
    return f"open until {' and '.join(w + chr(39) + 's' for w in whose)} {costs} measured on a GPU"


def span_text(low: float, high: float, text: Callable[[float], str] = lambda value: f"{value:.4g}") -> str:
    """'300.4–615.2' where the ends differ as written, else the one figure."""
    low_said, high_said = text(low), text(high)
    return low_said if low_said == high_said else f"{low_said}–{high_said}"


OWN_RANGE = "from none of its own cost to a CPU's"
"""A step bounded by its own cost, said: from none of it (a GPU's may be small) to a CPU's, scaled (fsdp.for_cluster,
zero.own_for_cluster say how much, once)."""


def percent(value: float, band: float = agreement.SMALL_CAP_LEAD, sign: str = "") -> str:
    """`value` as a percentage at 0.1 %, or at as many more digits (up to 0.001 %) as it takes to read on the side of
    the tie's `band` it is on: a lead of 3.957 % is tied (within 4 %), and '4.0%' would read outside it: '3.96%'."""
    for digits in (1, 2, 3):
        said = f"{value:{sign}.{digits}%}"
        if (value <= band) == (float(said.rstrip("%")) / 100 < band):
            break
    return said


def behind_text(low: float, high: float, band: float = agreement.SMALL_CAP_LEAD) -> str:
    """'5.3%', or over the own-cost bounds' corners '0.1–105.1%' ('-1.2% to +40.0%' where one end leads); an end
    that rounds to zero reads '0.0%', never '-0.0%' (a lead of 0.01 % read '-0.0% to +30.0%'); each end with the
    digits that keep it on its side of the tie's `band` (`percent`)."""
    low, high = (0.0 if f"{end:.1%}" in ("0.0%", "-0.0%") else end for end in (low, high))
    if percent(low, band) == percent(high, band):
        return percent(low, band)
    if low >= 0:
        return f"{percent(low, band).removesuffix('%')}–{percent(high, band)}"
    return f"{percent(low, band, '+')} to {percent(high, band, '+')}"


def lead_words(low: float, high: float) -> str:
    """How far a step is behind another over every corner, in words true at each: '0.1–105.1% slower', '2.0%
    faster', or where it leads at one end only, '3.0% faster to 47.0% slower' (not '-3.0% to +47.0% slower')."""
    low, high = (0.0 if f"{end:.1%}" in ("0.0%", "-0.0%") else end for end in (low, high))
    if low >= 0:
        return f"{behind_text(low, high)} slower"
    if high <= 0:
        return f"{behind_text(-high, -low)} faster"
    return f"{percent(-low)} faster to {percent(high)} slower"


def open_words(choice) -> str:
    """'open until FSDP's own cost is measured on a GPU: fsdp without it, stock with a CPU's, scaled'."""
    short, long = (" or ".join(c.strategy for c in ends) for ends in choice.at_ends)
    return f"{own_cost_open(choice.open_on)}: {short} without it, {long} with a CPU's, scaled"
