"""`predict --cluster A,B`'s last word: the bookings (a cluster × a GPU count) side by side, each with what its
cluster's answer books, its step, the samples (tokens) a second, the GPU-hours it takes and, at the user's prices for
a GPU-hour, what it costs (and, where one booking's differs from another's, the samples a step of all its GPUs
together: 16 GPUs at 2 a GPU run another step than 8 do), as a table, then one line: the fastest booking and the one
of fewest GPU-hours (with prices, the cheapest), decided or open, and what step decides them
(perfmodel.clusters.bookings). One cluster's bookings with --train-samples: the whole run's hours, GPU-hours and cost
at each GPU count, under its answer (`one_cluster_run`)."""

from __future__ import annotations

import math
import re

from harness.commands.console import say, say_once
from harness.commands.console.predict.answer import book_cell
from harness.commands.console.predict.scaling import FAR_BELOW_ASSUMED
from harness.perfmodel.clusters import whole_run
from harness.perfmodel.clusters.bookings import (
    COMM_BOUND,
    LEAD,
    Booking,
    Ranking,
    Turn,
    booked_cap,
    break_even,
    cheapest,
    fastest,
    fewest_gpu_hours,
    turns,
)
from harness.perfmodel.clusters.whole_run import counted, span
from harness.perfmodel.pick.bounds import CPU, LONG, OWN_COST_OF, SHORT, end_words, own_cost_open
from harness.perfmodel.pick.choice_table import cost_unit
from harness.results.values import ms_text, rate_text

TEXT = ("cluster", "book")
"""The columns of words, aligned left; every other is of figures, aligned right."""


def compared(bookings: list[Booking], *, tokens: bool, ends: tuple[str, str] | None, note: str = "",
             prices: dict[str, float] | None = None, gpus: dict[str, str] | None = None,
             far_below_peak: bool = False, samples: float | None = None) -> str:  # fmt: skip
    """Say the table, `note` under it, and the verdict line; the verdict returned. `samples`: the whole run's
    (--train-samples), timed (and at `prices`, costed) on each booking in its own columns, in place of the cost a
    million samples, and the fastest set against the cheapest in the verdict (whole_run.premium_words). `ends`: the
    two ends' names (compute-bound, memory-bound) where a step is bounded on some cluster, None where every step is
    a cluster's own GPU's; `note`: what the throughput and GPU-hours rest on (answer.run_batch_caveat); `prices`: a
    GPU-hour's price on each cluster (--gpu-hour-price), a cost column and the cheapest ranked by it; `gpus`: each
    cluster's profile description, whose GPU a break-even price ratio names where there are no prices;
    `far_below_peak`: the step given is far below its GPU's peak (scaling.LOW_SHARE), so a range of it bounds it only
    as it assumes."""
    unit = "tokens" if tokens else "samples"
    peaks = any(b.peak_gib for b in bookings)  # memory counted: what a GPU holds, beside its step
    bound = any(b.comm_share == b.comm_share for b in bookings if b.fits)  # the picks' exposed communication known
    header = ("cluster", "GPUs", "nodes", "book", "step ms", *(("peak GiB a rank",) if peaks else ()),
              *(("bound: exposed comm",) if bound else ()), f"{unit}/s", f"GPU-h per {cost_unit(tokens)}")  # fmt: skip
    runs = {id(run.booking): run for run in whole_run.of_bookings(bookings, samples, prices)} if samples else {}
    header += (f"price units per {cost_unit(tokens)}",) if prices and not samples else ()
    header += (*(("run h",) if samples else ()), *(("run cost",) if samples and prices else ()))
    unlike = len({b.gpus * b.batch for b in bookings}) > 1 and all(b.batch for b in bookings)
    header += ("samples a step",) if unlike else ()  # all GPUs' together, where a booking's differs from another's
    table = [header, *((*_cells(b, None if samples else prices, ends, peaks=peaks, bound=bound),
                        *(_run_cells(runs.get(id(b)), b.at_least, prices=bool(prices)) if samples else ()),
                        *([f"{b.gpus * b.batch:,}"] if unlike else [])) for b in bookings)]  # fmt: skip
    ranged = _ranged_words(bookings, ends)
    floored = "; ≥: at least, a full-size floor under the step (≤: at most)" * any(b.at_least for b in bookings)
    say(f"ddpbench predict: the bookings compared (the fastest each cluster's answer below books{ranged}{floored}):")
    _say_table(table)
    if note:  # said once: where an answer table above said it already, not again
        say_once(f"  {note}")
    if samples:
        say(f"  {whole_run.legend(list(runs.values()), samples, priced=bool(prices))}")
    if contrast := caps_contrast(bookings):
        say(f"  {contrast}")
    verdict = verdict_words(bookings, tokens=tokens, ends=ends, prices=prices, gpus=gpus,
                            far_below_peak=far_below_peak)  # fmt: skip
    if samples and (said := whole_run.premium_words(bookings, list(runs.values()), samples, prices)):
        verdict += f"; {said}"
    say(f"ddpbench predict: {verdict}")
    return verdict


def one_cluster_run(bookings: list[Booking], *, samples: float, ends: tuple[str, str] | None,
                    prices: dict[str, float] | None = None) -> None:  # fmt: skip
    """One cluster's whole run (--train-samples) at each GPU count asked, under its answer: what the answer books, its
    step, the run's hours, GPU-hours and, at `prices` (its one price, keyed by its name), cost, each a range where the
    step is one and `≥` where a full-size floor ranks it; what they count under it; then the fastest GPU count set
    against the cheapest (the fewest GPU-hours without a price). A user who chose the cluster asked for these; only
    several clusters' bookings had them."""
    runs = {id(run.booking): run for run in whole_run.of_bookings(bookings, samples, prices)}
    header = ("GPUs", "nodes", "book", "step ms", "run h", "run GPU-h", *(("run cost",) if prices else ()))
    table = [header]
    for b in bookings:
        run, mark = runs.get(id(b)), "≥" * b.at_least
        if run is None:  # nothing fits there: no run to time
            table.append((str(b.gpus), str(b.nodes), "none modelled fits", *([""] * (len(header) - 3))))
            continue
        figures = (run.hours, run.gpu_hours, *((run.cost,) if prices else ()))
        table.append((str(b.gpus), str(b.nodes), _book_text(b, ends), mark + span(b.step_ms, lambda v: f"{v:.4g}"),
                      *(mark + span(values) for values in figures)))  # fmt: skip
    ranged = _ranged_words(bookings, ends)
    floored = "; ≥: at least, a full-size floor under the step" * any(b.at_least for b in bookings)
    cluster = bookings[0].cluster if bookings else ""
    say(f"ddpbench predict: the run of {whole_run.amount_text(samples)} samples on {cluster}, per GPU count (what "
        f"its answer books{ranged}{floored}):")  # fmt: skip
    _say_table(table)
    say(f"  {whole_run.legend(list(runs.values()), samples, priced=bool(prices))}")
    if said := whole_run.premium_words(bookings, list(runs.values()), samples, prices):
        say(f"ddpbench predict: {said}")


def _say_table(table: list[tuple[str, ...]]) -> None:
    """The header and rows, the words (TEXT) aligned left, the figures right."""
    widths = [max(len(row[k]) for row in table) for k in range(len(table[0]))]
    right = [k for k, name in enumerate(table[0]) if name not in TEXT]
    for row in table:
        cells = [cell.rjust(width) if k in right else cell.ljust(width) for k, (cell, width) in
                 enumerate(zip(row, widths, strict=False))]  # fmt: skip
        say("  " + "  ".join(cells).rstrip())


OUTLAST = 1.5
"""All-reduces over this many times backward: most of them are left after it, not hidden (caps_contrast)."""


def caps_contrast(bookings: list[Booking]) -> str:
    """'the caps differ by cluster: on l40s-pcie DDP's all-reduces at the cap booked take 44–49.4 ms a step, 2.7–3×
    backward's 16.4 ms, …': where clusters book DDP at different caps, each one's all-reduces against its calibrated
    backward (the figures each cluster's 'Why' line says far below), and, where one cluster's outlast backward and
    another's do not, what each cap buys there; '' where the caps agree or a figure is missing."""
    booked = [b for b in bookings if booked_cap(b.book) is not None and b.allreduce_ms == b.allreduce_ms]
    clusters = list(dict.fromkeys(b.cluster for b in booked))
    caps = {name: {booked_cap(b.book) for b in booked if b.cluster == name} for name in clusters}
    if len(clusters) < 2 or len({frozenset(c) for c in caps.values()}) < 2:
        return ""
    said, outlast = [], {}
    for k, name in enumerate(clusters):
        mine = [b for b in booked if b.cluster == name]
        backward = mine[0].backward_ms
        if backward != backward or backward <= 0:
            return ""
        comm = [b.allreduce_ms for b in mine]
        ratios = [ms / backward for ms in comm]
        outlast[name] = min(ratios) > OUTLAST
        at = " or ".join(f"{cap:g}" for cap in sorted(caps[name]))
        figures = f"{_least_most(comm, '.3g')} ms a step, {_least_most(ratios, '.2g')}×"
        said.append(
            f"on {name} DDP's all-reduces at the cap booked ({at} MiB) take {figures} backward's {backward:.3g} ms"
            if k == 0
            else f"on {name} ({at} MiB) {figures} its {backward:.3g} ms"
        )
    why = ""
    if len(set(outlast.values())) > 1:  # one outlasts backward, another about matches it: what a cap changes there
        why = (
            ": where they outlast backward most are left after it, and fewer, larger buckets take less time; "
            "where they about match it only the last bucket's is, which a smaller cap shortens"
        )
    return f"the caps differ by cluster: {'; '.join(said)}{why} (each cluster's 'Why' below)"


def _least_most(values: list[float], spec: str) -> str:
    """'44–49.4': the least and the most of `values`, once where they read alike."""
    return "–".join(dict.fromkeys(format(v, spec) for v in (min(values), max(values))))


def _ranged_words(bookings: list[Booking], ends: tuple[str, str] | None) -> str:
    """What a range in the table spans: a step measured on another GPU (its two ends), an own cost a CPU measured."""
    why = [f"a step measured on another GPU, at its {ends[0]} and {ends[1]} ends"] if ends else []
    own = list(dict.fromkeys(m for b in bookings if b.bounded for m in b.own_cost_of))
    if own:
        whose = " and ".join(OWN_COST_OF.get(m, m) + "'s" for m in own)
        at = next((b.whose for b in bookings if b.bounded and b.own_cost_of), CPU)  # a CPU's, or a GPU run's
        why.append(f"from none of {whose} own cost to {at}, scaled")
    return f"; a range: {'; '.join(why)}" if why else ""


def _cells(b: Booking, prices: dict[str, float] | None, ends: tuple[str, str] | None = None, *,
           peaks: bool = False, bound: bool = False) -> tuple[str, ...]:  # fmt: skip
    """A booking's row; `peaks`: with its pick's peak a rank (the answer table's 'peak GiB', '20.1 / 14.7' where it
    books several) of its GPU's memory ('20.1 of 22': GPUs of unlike memory side by side); `bound`: with whether
    its step is compute- or communication-bound (bound_cell)."""
    if not b.fits:
        blank = 3 + peaks + bound + bool(prices)
        return (b.cluster, str(b.gpus), str(b.nodes), "none modelled fits", *([""] * blank))
    book = _book_text(b, ends)
    mark = "≥" if b.at_least else ""
    cost = (mark + span(tuple(prices[b.cluster] * h for h in b.gpu_hours), counted),) if prices else ()
    of = f" of {b.capacity_gib:.3g}" if b.capacity_gib and b.peak_gib else ""
    peak = (" / ".join(f"{gib:.3g}" for gib in b.peak_gib) + of,) if peaks else ()
    return (b.cluster, str(b.gpus), str(b.nodes), book, mark + span(b.step_ms, lambda v: f"{v:.4g}"), *peak,
            *((bound_cell(b),) if bound else ()), ("≤" if b.at_least else "") + span(b.per_s, rate_text),
            mark + span(b.gpu_hours, counted), *cost)  # fmt: skip


def _book_text(b: Booking, ends: tuple[str, str] | None) -> str:
    """What a booking books, each end's where they differ, and what it ties with."""
    book = _ends_book(book_cell(b.book), book_cell(b.other_end)) if b.other_end else book_cell(b.book)
    return book + (f" (or {_tied_words(b, ends)})" if b.tied else "")


def _run_cells(run: whole_run.WholeRun | None, at_least: bool, *, prices: bool) -> tuple[str, ...]:
    """A booking's whole run: its hours and, at the prices given, its cost ('' where it has none: nothing fits)."""
    if run is None:
        return ("", "") if prices else ("",)
    mark = "≥" if at_least else ""
    return mark + span(run.hours, counted), *((mark + span(run.cost, counted),) if prices else ())


def bound_cell(b: Booking) -> str:
    """'comm 65% (835 ms)': whether the booked step is communication-bound (its pick's exposed communication over
    COMM_BOUND of its step, the short end's) or compute-bound, the share and the ms; '' where not known."""
    share = b.comm_share
    if share != share:
        return ""
    return f"{'comm' if share > COMM_BOUND else 'compute'} {share:.0%} ({ms_text(b.exposed_ms)} ms)"


def _ends_book(here: str, there: str) -> str:
    """'fsdp or stock → stock at 25 MiB': what each end's answer books, a cap both end on said once, last."""
    cap = there.rpartition(" at ")[2] if " at " in there else ""
    if cap and here.endswith(f" at {cap}"):
        here = here.removesuffix(f" at {cap}")
    return f"{here} → {there}"


def _tied_words(b: Booking, ends: tuple[str, str] | None) -> str:
    """'fsdp, zero, tied' in the answer's order, or where a step's range ties some at one end only, 'fsdp, tied; zero
    too at the memory-bound end': the answer above ties at its printed end alone, so a tie at the other end is said
    to be that end's."""
    apart = {s for end in b.tied_at_one_end for s in end} if ends else set()
    both = [s for s in b.tied if s not in apart]
    said = [f"{', '.join(both)}, tied"] if both else []
    said += [f"{', '.join(only)} {'too' if said else 'tied'} at the {name} end"
             for only, name in zip(b.tied_at_one_end, ends or (), strict=False) if only]  # fmt: skip
    return "; ".join(said)


def verdict_words(bookings: list[Booking], *, tokens: bool, ends: tuple[str, str] | None,
                  prices: dict[str, float] | None = None, gpus: dict[str, str] | None = None,
                  far_below_peak: bool = False) -> str:  # fmt: skip
    """'fastest: dgx-h100 × 32 GPUs; fewest GPU-hours per sample: …' (an hour of any GPU alike: where the leader's GPU
    is not the others', the price ratio it stays the cheapest under), or with `prices` 'cheapest per sample (at the
    prices given): …', each decided (at both ends, where a step is bounded), a tie, or open (the best at each end),
    and where open, which step to measure to decide; then, where one cluster's step is bounded, the step on its GPU at
    which each ranking turns (`_turn_words`)."""
    per = "token" if tokens else "sample"
    if prices:
        ranked = {"fastest": fastest(bookings), f"cheapest per {per} (at the prices given)": cheapest(bookings, prices)}
    else:  # not 'cheapest': what an hour of each GPU costs is the user's
        ranked = {"fastest": fastest(bookings), f"fewest GPU-hours per {per}": fewest_gpu_hours(bookings)}
    if not any(r.best for r in ranked.values()):
        return "no booking to compare: none modelled fits at any GPU count asked"
    both = " at both ends" if ends and any(b.bounded for b in bookings) else ""
    parts, open_on, why = [], [], f": within {LEAD:.0%} of the best, more than the model can tell"
    assumed = f", {FAR_BELOW_ASSUMED}" * far_below_peak
    for what, ranking in ranked.items():
        words = _ranking_words(ranking, _end_names(bookings, ends), both + (assumed if both else ""))
        assumed = assumed if not (both and ranking.decided) else ""  # said where 'at both ends' first is
        aside = []
        if ranking.decided and len(ranking.best) > 1:  # a tie: why said the first time
            aside, why = [f"tied{why}"], ""
        if not prices and what != "fastest":  # the GPU-hours: the prices' ratio under which they cost least
            aside += [even] if (even := _break_even_words(bookings, ranking, gpus or {})) else []
        words += f" ({'; '.join(aside)})" if aside else ""
        parts.append(f"{what}: {words}")
        open_on += ranking.open_on
    said = "; ".join(parts)
    if open_on:
        said += ": " + _open_until(bookings, list(dict.fromkeys(open_on)))
    turned = _turn_words(turns(bookings, prices), ("fastest", "cheapest" if prices else "fewest GPU-hours"),
                         settles=far_below_peak and not open_on)  # fmt: skip
    return f"{said}; {turned}" if turned else said


def _turn_words(turned: tuple[Turn | None, ...], what: tuple[str, ...], *, settles: bool) -> str:
    """'dgx-h200 is fastest while its GPU's step is under about 310 ms, cheapest under about 164 ms (bounded
    97.75–131.7 ms)' ('under 150 ms at least' past the bounds, where the line is not followed: bookings.turns): what
    decides the rankings, said whether they are decided or open; `settles`, the step given is far below its GPU's
    peak (and the rankings decided between its bounds): its bounds assume it scales as its GPU's memory bandwidth or
    peak, which such a step may not, so one step measured there settles it."""
    said = [(name, turn) for name, turn in zip(what, turned, strict=True) if turn is not None]
    if not said:
        return ""
    cluster, (low, high) = said[0][1].cluster, said[0][1].bounds
    under = ", ".join(f"{name} {'while its GPU' + chr(39) + 's step is ' if k == 0 else ''}under "
                      + (f"{turn.step_ms:.3g} ms {turn.sure}" if turn.sure else f"about {turn.step_ms:.3g} ms")
                      for k, (name, turn) in enumerate(said))  # fmt: skip
    settled = f": one step measured on {cluster}'s GPU settles it" if settles else ""
    return f"{cluster} is {under} (bounded {low:.4g}–{high:.4g} ms){settled}"


def _open_until(bookings: list[Booking], clusters: list[str]) -> str:
    """What decides an open ranking: one step measured on each bounded cluster's GPU, an own cost on a GPU."""
    hanging = [b for b in bookings if b.cluster in clusters and b.bounded]
    stepped = [name for name in clusters if any(b.stepped_elsewhere for b in hanging if b.cluster == name)]
    said = []
    if stepped:
        gpus = " and ".join(f"{name}'s GPU" for name in stepped)
        said.append(f"one step is measured on {gpus} (--local-step-ms without --local-step-gpu)")
    own = list(dict.fromkeys(m for b in hanging for m in b.own_cost_of))
    if own:
        said.append(own_cost_open(own).removeprefix("open until "))
    return "open until " + " and ".join(said)


def _end_names(bookings: list[Booking], ends: tuple[str, str] | None) -> tuple[str, str]:
    """The two ends of the bounded steps in the user's terms: 'at the compute-bound end' (a step measured on another
    GPU), 'without FSDP's own cost' and 'with it at a CPU's' (an own cost a CPU measured), both where both bound
    them ('at the compute-bound end without FSDP's own cost': a range's short end holds both, Booking.step_ms)."""
    own = list(dict.fromkeys(m for b in bookings if b.bounded for m in b.own_cost_of))
    stepped = [f"at the {end} end" for end in ends] if ends else ["", ""]
    whose = next((b.whose for b in bookings if b.bounded and b.own_cost_of), CPU)
    costs = [end_words(dict.fromkeys(own, end), again=k == 1, whose=whose) for k, end in enumerate((SHORT, LONG))]
    said = [" ".join(part for part in (step, cost) if part) for step, cost in zip(stepped, costs, strict=True)]
    return said[0] or "at the short end", said[1] or "at the long end"


def _ranking_words(ranking: Ranking, ends: tuple[str, str], both: str) -> str:
    if ranking.decided:
        return f"{_named(ranking.best)}{both}"
    low, high = ranking.at_ends
    return f"{_named(low)} {ends[0]}, {_named(high)} {ends[1]}"


def _named(bookings: list[Booking]) -> str:
    """'dgx-h100 × 32 GPUs', 'dgx-a100 × 8/16/32 GPUs or dgx-h100 × 8 GPUs': per cluster, in the table's order."""
    clusters: dict[str, list[str]] = {}
    for b in bookings:
        clusters.setdefault(b.cluster, []).append(str(b.gpus))
    return " or ".join(f"{name} × {'/'.join(gpus)} GPUs" for name, gpus in clusters.items())


def _break_even_words(bookings: list[Booking], ranking: Ranking, gpus: dict[str, str]) -> str:
    """'cheaper while an H100 hour costs under 1.6× an A100's: --gpu-hour-price dgx-a100=P,dgx-h100=Q ranks by cost',
    where one cluster's bookings take the fewest GPU-hours (decided) and another's GPU (both known) is not its: the
    ratio against the rival it leads least, a range where the steps are ('1.6–3.4×': under its least, cheaper at every
    end)."""
    leaders = {b.cluster for b in ranking.best}
    if not ranking.decided or len(leaders) != 1:
        return ""
    (leader,) = leaders
    ours = _gpu(gpus.get(leader, ""))
    rivals = list(dict.fromkeys(b.cluster for b in bookings if b.fits and b.cluster != leader))
    evens = {name: break_even(bookings, leader, name) for name in rivals if _gpu(gpus.get(name, "")) not in ("", ours)}
    if not ours or not evens:
        return ""
    rival = min(evens, key=lambda name: evens[name])
    low, high = evens[rival]
    ratio = _two_digits(low, math.floor) + ("" if high <= low * 1.005 else f"–{_two_digits(high, math.ceil)}")
    clusters = list(dict.fromkeys(b.cluster for b in bookings))
    flag = ",".join(f"{name}={chr(ord('P') + k)}" for k, name in enumerate(clusters))
    theirs = _gpu(gpus[rival])
    return (
        f"cheaper while {_a(ours)} {ours} hour costs under {ratio}× {_a(theirs)} {theirs}'s: "
        f"--gpu-hour-price {flag} ranks by cost"
    )


def _gpu(description: str) -> str:
    """'A100' of 'DGX A100: 8× A100 SXM4 80GB, …': the first GPU model a profile's description names; '' where none."""
    found = re.search(r"\b[A-Z]\d{1,3}[A-Z]?\b", description)
    return found.group(0) if found else ""


def _a(name: str) -> str:
    return "an" if name[:1] in "AEFHILMNORSX" else "a"


def _two_digits(value: float, rounded) -> str:
    """Two significant digits, rounded down (the least of a range: under it holds) or up (its most)."""
    step = 10.0 ** (math.floor(math.log10(value)) - 1)
    return f"{rounded(round(value / step, 9)) * step:g}"
