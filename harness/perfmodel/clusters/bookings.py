"""Several clusters' answers compared per booking (a cluster × a GPU count): the pick each answer makes, its step, the
samples (or tokens) a second the booking trains on, the GPU-hours a million samples (a billion tokens) take, and which
booking is fastest, which takes the fewest GPU-hours, and, at the user's prices for an hour of each cluster's GPU,
which is cheapest (without prices, the ratio of those prices at which the fewest GPU-hours stop being the cheapest:
`break_even`). A step measured on another GPU than a cluster's is only bounded there (two
ends, config.precision.step_bounds): each figure is then a range, and a ranking is decided only where it holds over
every value in the ranges, else open until the step of the clusters it hangs on is measured.

Pure arithmetic over the choices (perfmodel.pick.choice) and the predicted rows each cluster's prediction made.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import NamedTuple

import pandas as pd

from harness.analysis import agreement
from harness.perfmodel.pick import bounds
from harness.perfmodel.pick.choice import Choice, whole_step
from harness.perfmodel.pick.choice_table import gpu_hours_per_step_ms
from harness.perfmodel.pick.compressed import EXPOSED as HOOK_SENDS_LESS
from harness.perfmodel.pick.ranked import ranked_row

LEAD = agreement.SMALL_CAP_LEAD
"""Bookings within this of the best are tied: a lead under it is more than the model can tell (as the choice's)."""


@dataclasses.dataclass(frozen=True)
class Booking:
    cluster: str
    nodes: int
    gpus: int
    book: str  # what the cluster's answer books at this GPU count (at the short end): its pick, or where an own
    # cost leaves it open, every pick it leaves open ('fsdp or stock at 25 MiB', as its table); '' where none fits
    tied: tuple[str, ...]  # the strategies the answer ties with it, at either end
    other_end: str  # what the answer books at the long end where it is not `book`; '' where the same (or one end)
    step_ms: tuple[float, ...]  # the booked step at its short end and its long end; one figure where they are one
    at_least: bool  # a full-size floor ranks it: the step is at least this
    per_s: tuple[float, ...]  # samples (or tokens) a second at each end: GPUs × a GPU's batch / the step
    gpu_hours: tuple[float, ...]  # GPU-hours a million samples (a billion tokens) take at each end
    stepped_elsewhere: bool = False  # its range holds a step measured on another GPU (--local-step-gpu)
    own_cost_of: tuple[str, ...] = ()  # the step models whose own cost, a CPU's, its range holds (FSDP2, ZeRO-1)
    tied_at_one_end: tuple[tuple[str, ...], ...] = ()  # per end of a step's range, those of `tied` tied there only
    whose: str = bounds.CPU  # whose own cost `own_cost_of` is: a CPU's, or the run's (a GPU's, not told from noise)
    local_ms: tuple[float, ...] = ()  # a step measured on another GPU: the one-GPU step at each end on this cluster's
    batch: int = 0  # a GPU's samples a step, as `per_s` counts them (0: not said)
    allreduce_ms: float = float("nan")  # DDP's all-reduces a step at the cap booked, at the short end (its answer's
    # 'Why': the full size's where a floor ranks it); NaN where DDP at a cap is not what is booked
    backward_ms: float = float("nan")  # backward as calibrated for this cluster's step, at the short end
    peak_gib: tuple[float, ...] = ()  # a rank's peak as counted (the fit's need) of each strategy `book` names, at the
    # short end: its answer table's 'peak GiB', so that the side by side says what a GPU holds; () without memory
    capacity_gib: float = 0.0  # what a process can use of its cluster's GPU (0: the profile does not say)
    exposed_ms: float = float("nan")  # the communication its pick leaves exposed a step at the short end (exposed_ms);
    # NaN where several are booked (open) or its figures are not in the rows

    @property
    def comm_share(self) -> float:
        """The share of the booked step (its short end) that communication left exposed takes: over COMM_BOUND, the
        booking is communication-bound; NaN where not known."""
        return self.exposed_ms / self.step_ms[0] if self.step_ms else float("nan")

    @property
    def bounded(self) -> bool:
        """Its step is a range: measured on another GPU, or holding an own cost a CPU measured, and the ends differ."""
        return len(set(self.step_ms)) > 1

    @property
    def fits(self) -> bool:
        return bool(self.step_ms)


class _Picked(NamedTuple):
    book: str  # what the answer books: its pick, or every pick an own cost leaves open ('fsdp or stock at 25 MiB')
    tied: tuple[str, ...]
    steps: tuple[float, float] | None  # the booked step without any own cost a CPU measured, and with all of it
    floored: bool  # a full-size floor ranks it
    own_cost_of: tuple[str, ...]  # the step models whose own cost the steps range over
    peak_gib: tuple[float, ...] = ()  # each booked pick's need a rank, GiB, as the choice judged its fit
    exposed_ms: float = float("nan")  # the communication the booked pick leaves exposed a step (exposed_ms)


def of_cluster(name: str, gpus_per_node: int, ends_rows: list[pd.DataFrame], choices: list[dict[int, Choice]], *,
               batch: int, tokens: float | None = None, local_ms: tuple[float, ...] = (),
               backward_ms: float = float("nan"), capacity_gib: float = 0.0) -> list[Booking]:  # fmt: skip
    """One cluster's bookings, a GPU count each: `ends_rows`, the predicted rows at each end (one frame an end, every
    GPU count's rows; one end where the step is the cluster's own GPU's); `choices`, the choice at each end per GPU
    count ({} where none is made: no memory counted, so DDP's answer at its cap, its floor where higher, is the pick);
    `batch`, a GPU's samples a step; `tokens`, its tokens a step where the model is a language model's. A step is
    least with the step's short end and no own cost a CPU measured (FSDP's, ZeRO's), most with both long: its range;
    `local_ms`, the one-GPU step at each end where a step measured on another GPU bounds it (the turn's, `turns`);
    `backward_ms`, backward as calibrated at the short end, beside each booking's all-reduces (`caps_contrast`)."""
    per = gpu_hours_per_step_ms(batch=batch, tokens=tokens)
    a_step = tokens or batch
    out, whose = [], next((c.whose for chosen in choices for c in chosen.values() if c.bounds), bounds.CPU)
    for world, first in ends_rows[0].groupby("world_size", sort=True):
        world = int(world)
        picks = [_pick(rows[rows["world_size"] == world], chosen.get(world)) for rows, chosen in
                 zip(ends_rows, choices, strict=True)]  # fmt: skip
        fits = all(p.steps is not None for p in picks)  # none modelled fits at an end: no booking to rank
        steps = tuple(dict.fromkeys((picks[0].steps[0], picks[-1].steps[-1]))) if fits else ()
        book = picks[0].book
        other = next((p.book for p in picks[1:] if p.book and p.book != book), "")  # the long end's, where another
        booked = set(_strategies(book))
        at_ends = [[s for s in p.tied if s not in booked] for p in picks]  # in the answer's order
        tied = tuple(dict.fromkeys(s for end in at_ends for s in end))
        one_end = tuple(tuple(s for s in end if not all(s in other for other in at_ends)) for end in at_ends) \
            if len(picks) > 1 else ()  # fmt: skip
        out.append(Booking(name, int(first["nodes"].iloc[0]) if "nodes" in first else world // gpus_per_node, world,
                           book if steps else "", tied, other, steps, fits and any(p.floored for p in picks),
                           tuple(world * a_step / (ms / 1e3) for ms in steps),
                           tuple(ms * per for ms in steps), len(picks) > 1,
                           tuple(dict.fromkeys(m for p in picks for m in p.own_cost_of)), one_end, whose,
                           local_ms if len(picks) > 1 else (), batch,
                           _allreduce_ms(first, book if steps else "", floored=any(p.floored for p in picks[:1])),
                           backward_ms, picks[0].peak_gib if steps else (), capacity_gib,
                           picks[0].exposed_ms if steps else float("nan")))  # fmt: skip
    return out


COMM_BOUND = 0.5
"""A booking whose exposed communication takes more than this share of its step is communication-bound: most of its
step waits on the network, so a faster one (or fewer nodes) moves it more than a faster GPU; else compute-bound."""

EXPOSED = {"DDP": ("exposed_comm_ms", "full_size_exposed_ms"),
           "ZeRO-1": ("zero_broadcast_ms", "zero_full_size_broadcast_ms"),
           "FSDP2": ("fsdp_exposed_ms", "fsdp_full_size_exposed_ms")}  # fmt: skip
"""Each step model's communication left exposed a step, as predicted and with the full size's floors: DDP's all-reduces
after backward, FSDP2's gathers and reduce-scatters not hidden, ZeRO-1's broadcasts (which overlap nothing; DDP's
exposed all-reduces come first in its step, added)."""


def exposed_ms(rows: pd.DataFrame, c) -> float:
    """The communication pick `c` (a choice's Candidate) leaves exposed a step, from its own figures in `rows` (one GPU
    count's, a row a cap) at the cap its step is at (FSDP2's: any): the full size's where its floor ranks it; NaN
    where a figure is missing. Under a compression hook, the hook's (compression.with_compressed's columns)."""
    at = rows[rows["bucket_cap_mb"] == c.step_cap_mb] if c.step_cap_mb is not None else rows
    full = int(c.profiled_ms is not None)
    models = ("DDP", c.model) if c.model == "ZeRO-1" else (c.model,)
    columns = [EXPOSED[m][full] for m in models if m in EXPOSED]
    if HOOK_SENDS_LESS in c.note:  # DDP under a compression hook that sends fewer bytes: its own exposed figure
        columns = [("compressed_exposed_comm_ms", "compressed_full_size_exposed_ms")[full]]
    if at.empty or not columns or any(col not in at for col in columns):
        return float("nan")
    return float(sum(at[col].iloc[0] for col in columns))


def _allreduce_ms(rows: pd.DataFrame, book: str, *, floored: bool) -> float:
    """DDP's all-reduces a step at the cap `book` names ('stock at 25 MiB'), as its answer's 'Why' says them: the
    full size's where a floor ranks the step; NaN where no cap is booked for DDP's schedule."""
    cap = booked_cap(book)
    at = rows[rows["bucket_cap_mb"] == cap] if cap is not None else rows.iloc[:0]
    column = "full_size_comm_ms" if floored and "full_size_comm_ms" in rows else "comm_ms"
    return float(at[column].iloc[0]) if len(at) and column in at else float("nan")


def booked_cap(book: str) -> float | None:
    """The bucket cap a booking's `book` names, where one DDP-scheduled pick is booked ('stock at 25 MiB': 25);
    None for several ('fsdp or stock at 25 MiB') or none."""
    found = re.fullmatch(r"[^ ]+ at ([0-9.]+) MiB", book)
    return float(found.group(1)) if found else None


def _pick(rows: pd.DataFrame, choice: Choice | None) -> _Picked:
    """The choice's pick, as its answer's table books it: its first, the rest tied; where its own costs leave it open,
    every pick named (as the table's 'fsdp or stock at 25 MiB': the answer leaves the one to book open), the step
    from the fastest without any own cost to the fastest with all of them (choice_table.step_cell's range); without a
    choice, DDP at the cap its answer books (ranked.ranked_row: by the full size's floors where they rank it)."""
    if choice is not None:
        if not choice.picked:
            return _Picked("", (), None, False, ())
        first = last = choice.picked[0]  # what the answer books first: fits with room, least machinery, fastest
        if choice.open_on:  # the pick at each end of the own costs: without any, with all of them
            first, last = min(choice.at_ends[0], key=lambda c: c.step_ms), min(choice.at_ends[1], key=whole_step)
            book, tied, booked = " or ".join(c.named for c in choice.picked), (), choice.picked
        else:
            book, tied, booked = first.named, tuple(c.strategy for c in choice.picked[1:]), choice.picked[:1]
        own = tuple(dict.fromkeys(c.model for c in (first, last) if c.bounded))
        return _Picked(book, tied, (first.step_ms, whole_step(last)),
                       any(c.profiled_ms is not None for c in (first, last)), own,
                       tuple(c.need_mb / 1024 for c in booked),
                       float("nan") if choice.open_on else exposed_ms(rows, first))  # fmt: skip
    row = ranked_row(rows.reset_index(drop=True), "step_ms", "full_size_step_floor_ms")  # the answer's cap, by floors
    floor = float(row.get("full_size_step_floor_ms", float("nan")))
    step = float(row["step_ms"])
    floored = floor > step  # NaN where no floor: False
    step = floor if floored else step
    exposed = float(row.get(EXPOSED["DDP"][int(floored)], float("nan")))  # the step's own: the floor's where it ranks
    return _Picked(f"DDP at {float(row['bucket_cap_mb']):g} MiB", (), (step, step), floored, (), exposed_ms=exposed)


def _strategies(book: str) -> list[str]:
    """The strategies a booking's `book` names: ['fsdp', 'stock'] of 'fsdp or stock at 25 MiB'."""
    return [pick.split(" at ")[0] for pick in book.split(" or ")]


@dataclasses.dataclass(frozen=True)
class Ranking:
    """The best bookings by one figure, those within `LEAD` of the least (several: a tie the model cannot tell apart).
    Where a step is bounded, at every corner of the bounds (each bounded cluster at either end: its bookings move
    together): `best`, the same at every corner (decided); else `open_on`, the bounded clusters the best hang on
    (measure one step on each's GPU), and `at_ends`, the best with every bounded step at its short end, at its long."""

    best: list[Booking]
    open_on: list[str]
    at_ends: tuple[list[Booking], list[Booking]] = ([], [])

    @property
    def decided(self) -> bool:
        return not self.open_on


def _slowness(b: Booking, k: int) -> float:
    return 1 / b.per_s[k]


def _hours(b: Booking, k: int) -> float:
    return b.gpu_hours[k]


def _cost(prices: dict[str, float]) -> Callable[[Booking, int], float]:
    return lambda b, k: prices[b.cluster] * b.gpu_hours[k]


def fastest(bookings: list[Booking], lead: float = LEAD) -> Ranking:
    """The bookings that train fastest (the most samples or tokens a second)."""
    return _ranked(bookings, _slowness, lead)


def fewest_gpu_hours(bookings: list[Booking], lead: float = LEAD) -> Ranking:
    """The bookings that take the fewest GPU-hours a million samples (a billion tokens): an hour of any GPU alike."""
    return _ranked(bookings, _hours, lead)


def cheapest(bookings: list[Booking], prices: dict[str, float], lead: float = LEAD) -> Ranking:
    """The bookings that cost the least a million samples (a billion tokens): their GPU-hours × `prices`, a GPU-hour's
    price on each cluster (every cluster's, in the user's own units)."""
    return _ranked(bookings, _cost(prices), lead)


class Turn(NamedTuple):
    """Where a ranking turns on the one cluster whose step a step measured on another GPU only bounds: its best
    booking is the best while its one-GPU step is under `step_ms` (its bounds, `bounds`, beside it); `sure`: '' where
    that step is the straight line's ('about'), 'at least' or 'at most' where only that much is known (`turns`)."""

    cluster: str
    step_ms: float
    bounds: tuple[float, float]
    sure: str = ""


def turns(bookings: list[Booking], prices: dict[str, float] | None = None) -> tuple[Turn | None, Turn | None]:
    """The turn of the fastest and of the second ranking (the cheapest at `prices`, else the fewest GPU-hours): the
    one-GPU step on the bounded cluster at which its best booking meets the others' best, each booking's figure
    taken as linear in that step between its two ends. Past them the line is not followed: a booking's step grows at
    most one for one with its GPU's (its compute is that step; its exposed communication and a floor's excess only
    shrink as the step grows), and as fast only where nothing is left to hide (its step already grew so between the
    ends). So past the long end the turn is at least where steps growing one for one meet (said 'at least'; the line,
    which under-reads them where communication was exposed, taken only where the two agree to within LEAD), and
    before the short end at most there ('at most'). None where no one step decides it: no cluster bounded so, or
    several, an own cost's range, another cluster's figures ranges too."""
    fit = [b for b in bookings if b.fits]
    stepped = {b.cluster for b in fit if b.bounded}
    if len(stepped) != 1:
        return None, None
    (name,) = stepped
    ours, rivals = [b for b in fit if b.cluster == name], [b for b in fit if b.cluster != name]
    if not rivals or any(b.bounded for b in rivals) or any(b.own_cost_of or len(b.local_ms) != 2 for b in ours):
        return None, None
    return tuple(_turn(ours, rivals, value) for value in (_slowness, _cost(prices) if prices else _hours))


def _turn(ours: list[Booking], rivals: list[Booking], value: Callable[[Booking, int], float]) -> Turn | None:
    """Ours is best under the step at which any of ours meets the rivals' least: the most of those steps (on the
    line, and one for one from the nearer end: `turns`)."""
    least, at = min(value(b, 0) for b in rivals), []
    for b in ours:
        (low, high), (short, long) = b.local_ms, (value(b, 0), value(b, -1))
        if high > low and long > short:
            line = low + (least - short) * (high - low) / (long - short)
            # one for one past an end: a figure proportional to the step, at the end's figure a ms of its step
            past = high + (least - long) * b.step_ms[-1] / long if line > high else line
            at.append((line, low - (short - least) * b.step_ms[0] / short if line < low else past))
    if not at or max(line for line, _ in at) <= 0:
        return None
    line, sure = max(line for line, _ in at), max(sure for _, sure in at)
    (low, high), cluster = ours[0].local_ms, ours[0].cluster
    if low <= line <= high or abs(sure - line) <= LEAD * line:
        return Turn(cluster, line, (low, high))
    return Turn(cluster, sure, (low, high), "at least" if line > high else "at most")


def break_even(bookings: list[Booking], leader: str, rival: str) -> tuple[float, float]:
    """The least and the most ratio of a GPU-hour's price on `leader` to one on `rival` under which `leader`'s fewest
    GPU-hours cost less: `rival`'s least GPU-hours over `leader`'s, at every corner of their ends (one ratio where
    neither is a range)."""
    least = {name: [min(b.gpu_hours[k] for b in bookings if b.cluster == name and b.fits) for k in (0, -1)]
             for name in (leader, rival)}  # fmt: skip
    ratios = [theirs / ours for theirs in least[rival] for ours in least[leader]]
    return min(ratios), max(ratios)


def _ranked(bookings: list[Booking], cost: Callable[[Booking, int], float], lead: float) -> Ranking:
    """Least `cost` (of a booking at an end) first, at every corner of the bounded clusters' ends: a booking's step
    grows with its cluster's unknown step, so the order between two corners is the order at one of them."""
    fit = [b for b in bookings if b.fits]
    if not fit:
        return Ranking([], [])
    bounded = list(dict.fromkeys(b.cluster for b in fit if b.bounded))
    best, decided = bounds.at_every_corner(
        bounded, lambda at: _least(fit, lambda b: cost(b, at.get(b.cluster, bounds.SHORT)), lead)
    )
    if decided:
        return Ranking(best[0], [])
    hangs_on = {b.cluster for each in best for b in each} & set(bounded)
    return Ranking(best[0], [name for name in bounded if name in hangs_on] or bounded, (best[0], best[-1]))


def _least(bookings: list[Booking], value: Callable[[Booking], float], lead: float) -> list[Booking]:
    low = min(value(b) for b in bookings)
    return [b for b in bookings if value(b) <= low * (1 + lead)]
