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

from harness.analysis import agreement, roles

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


def benched_by(model: str) -> tuple[str, ...]:
    """What a bench at one GPU needs to measure a step model's own cost: the step it is beyond (measured.py's
    baseline for FSDP2's, the reference, DDP, for ZeRO-1's) and its own; () for another."""
    if model == "FSDP2":
        return (roles.baseline_name(), *roles.names_of(roles.shards_parameters))
    if model == "ZeRO-1":
        return (roles.reference_name(), *roles.names_of(roles.sharded_optimizer_over_allreduce))
    return ()


def own_cost_open(models: Iterable[str], *, bench: bool = True) -> str:
    """'open until FSDP's own cost is measured on a GPU (bench --gpus 1 --impls local,fsdp there)': what a choice
    that flips inside its own-cost bounds waits on (FSDP2's, ZeRO-1's: a CPU's own cost is no GPU's), and the one
    command that measures it (not `bench`: said apart)."""
    models = list(models)
    whose = [OWN_COST_OF.get(model, model) for model in models]
    costs = "own costs are" if len(whose) > 1 else "own cost is"
    bench = f" ({said} there)" if bench and (said := own_cost_bench(models)) else ""
    return f"open until {' and '.join(w + chr(39) + 's' for w in whose)} {costs} measured on a GPU{bench}"


def own_cost_bench(models: Iterable[str]) -> str:
    """'bench --gpus 1 --impls local,fsdp': the one command that measures these step models' own costs, run on a
    GPU (`benched_by`); '' for none."""
    impls = ",".join(dict.fromkeys(i for m in models for i in benched_by(m)))
    return f"bench --gpus 1 --impls {impls}" if impls else ""


CPU = "a CPU's"
"""Whose own cost a step's long end holds where the run was on a CPU (its own cost no GPU's); on a GPU whose steps
did not tell it from noise, "the run's" (own_costs.fsdp_for_cluster's `noise`, zero_for_cluster's)."""


def end_words(at: dict, *, again: bool = False, whose: str = CPU) -> str:
    """A corner of the own-cost bounds (`corners`) in the user's terms: 'without FSDP's own cost' (none of it on a
    GPU), 'with FSDP's own cost at a CPU's' (all of a CPU's, scaled), 'without FSDP's own cost, with ZeRO's at a
    CPU's'; '' where nothing is bounded. `again`: one cost named already ('without it', 'with it at a CPU's')."""
    if again and len(at) == 1:
        return "without it" if SHORT in at.values() else f"with it at {whose}"
    short = [OWN_COST_OF.get(m, m) + "'s" for m, end in at.items() if end == SHORT]
    long = [OWN_COST_OF.get(m, m) + "'s" for m, end in at.items() if end != SHORT]
    said = [f"without {' and '.join(short)} own cost" if short else "",
            f"with {' and '.join(long)}{' own cost' * (not short)} at {whose}" if long else ""]  # fmt: skip
    return ", ".join(part for part in said if part)


def span_text(low: float, high: float, text: Callable[[float], str] = lambda value: f"{value:.4g}") -> str:
    """'300.4–615.2' where the ends differ as written, else the one figure."""
    low_said, high_said = text(low), text(high)
    return low_said if low_said == high_said else f"{low_said}–{high_said}"


def own_range(whose: str = CPU) -> str:
    """A step bounded by its own cost, said: 'from none of its own cost, unmeasured on a GPU, to a CPU's, scaled': from
    none of it (a GPU's may be small) to `whose`, scaled (own_costs.fsdp_for_cluster, own_costs.zero_for_cluster say
    how much, once); "the run's" where the run was on a GPU whose steps did not tell it from noise. Why the step is a
    range is said in it: 'fsdp from none of its own cost to a CPU's' left a team lead asking what was missing."""
    why = "unmeasured on a GPU" if whose == CPU else "not told from noise"
    return f"from none of its own cost, {why}, to {whose}, scaled"


OWN_RANGE = own_range()


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


def lead_words(low: float, high: float, ends: tuple[dict, dict] = ({}, {}), whose: str = CPU) -> str:
    """How far a step is behind another over every corner, in words true at each: '0.1–105.1% slower', '2.0%
    faster', or where it leads at one end only, each figure with its end (`ends`: the corners of `low` and `high`,
    `end_words`): '3.0% faster without FSDP's own cost, 47.0% slower with it at a CPU's' (not '3.0% faster to 47.0%
    slower', which said neither end)."""
    low, high = (0.0 if f"{end:.1%}" in ("0.0%", "-0.0%") else end for end in (low, high))
    if low >= 0:
        return f"{behind_text(low, high)} slower"
    if high <= 0:
        return f"{behind_text(-high, -low)} faster"
    if not any(ends):  # no corner known: the figures alone
        return f"{percent(-low)} faster to {percent(high)} slower"
    faster = end_words(ends[0], whose=whose)
    slower = end_words(ends[1], again=list(ends[0]) == list(ends[1]), whose=whose)
    return f"{percent(-low)} faster {faster}, {percent(high)} slower {slower}".replace(" ,", ",").strip()


def open_words(choice) -> str:
    """'open until FSDP's own cost is measured on a GPU (bench …): fsdp without it, stock with a CPU's, scaled'."""
    short, long = (" or ".join(c.strategy for c in ends) for ends in choice.at_ends)
    return f"{own_cost_open(choice.open_on)}: {short} without it, {long} with {choice.whose}, scaled"
