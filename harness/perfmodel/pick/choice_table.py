"""The choice said as a table, where a terminal or a page leaves it in sight (harness.perfmodel.pick.choice's `choose`;
its `choice_words` say every step and caveat in full): per GPU count, the strategy to book, its step, the fastest of
the rest that fits and how far behind, the GPU-hours a million samples take, and what the pick rests on.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from harness.analysis import agreement
from harness.config.precision import bench_in
from harness.perfmodel.pick import bounds, parity
from harness.perfmodel.pick.choice import (
    Candidate,
    Choice,
    choose,
    whole_step,
    without_optimizer,
)
from harness.perfmodel.pick.compressed import EXPOSED, LOSSY
from harness.perfmodel.pick.turning import turning_share

COST = 5
"""The table's column of GPU-hours a million samples take: only where the steps are a GPU's and the batch known."""


def table_header(*, cost: bool = True, tokens: bool = False) -> tuple[str, ...]:
    """The choice's table's header (`table_rows`), its steps a GPU's (a CPU's profile ranks no step: the console and
    the page give its collectives instead); without the GPU-hours (`cost`) where `table_rows` had no batch to give
    them for; a billion tokens' (`tokens`: a language model's, tokens_a_step) in place of a million samples'."""
    cost_column = f"GPU-h per {cost_unit(tokens)}"
    header = ("GPUs", "book", "step ms", "next that fits", "behind", cost_column, "the pick rests on")
    return header if cost else header[:COST] + header[COST + 1 :]


def without_blank_columns(header: tuple[str, ...], rows: list[tuple]) -> tuple[tuple[str, ...], list[tuple]]:
    """The header and rows without a column blank on every row (a walkthrough read 'next that fits', 'behind' and
    'the pick rests on' empty down both models' tables); the GPU count, the booking and its step always stay."""
    kept = [k for k in range(len(header)) if k < 3 or any(row[k] for row in rows)]
    return tuple(header[k] for k in kept), [tuple(row[k] for k in kept) for row in rows]


def with_peak_column(header: tuple, rows: list[tuple], choices: list, capacity_gib: float) -> tuple[tuple, list]:
    """The choice table (the console's and the page's) with each pick's peak a rank beside its step, 'peak GiB a rank
    (of 44.39)': memory.need_mb as the choice judged its fit and the console's memory table gives it ('4 / 18.8' where
    a tie books several); blank where nothing fits."""
    of = f" (of {capacity_gib:g})" if capacity_gib else ""
    cells = [" / ".join(f"{c.need_mb / 1024:.3g}" for c in choice.picked) for choice in choices]
    at = header.index("step ms") + 1
    return (*header[:at], f"peak GiB a rank{of}", *header[at:]), [
        (*row[:at], cell, *row[at:]) for row, cell in zip(rows, cells, strict=True)
    ]


def cost_unit(tokens) -> str:
    """What the GPU-hours are counted per: a billion tokens where a GPU's tokens a step are known, else a million
    samples."""
    return "1B tokens" if tokens else "1M samples"


def gpu_hours_per_step_ms(*, batch: int, tokens: float | None) -> float:
    """GPU-hours per `cost_unit` for each ms of step: step s × 10⁹ / tokens a step / 3,600 s, or × 10⁶ / samples."""
    return 1e6 / 3600 / tokens if tokens else 1e3 / 3600 / batch


def tokens_a_step(state: pd.DataFrame) -> float | None:
    """A GPU's tokens a step, where the model is a language model's (memory counted them at the batch the steps are
    at, of the model you will train: --train-wopt seq_len's); None: its cost is counted in samples."""
    known = state["tokens_per_batch"].dropna() if "tokens_per_batch" in state else ()
    return float(known.iloc[0]) if len(known) and known.iloc[0] > 0 else None


def table_rows(state: pd.DataFrame, frames: list[pd.DataFrame], capacity_gib: float, *, optimizer_ms: float = 0.0,
               step_ms: float = 0.0, errors: dict | None = None, batch: int | None = None,
               made: tuple[list[Choice], dict[int, Choice]] | None = None) -> list[tuple]:  # fmt: skip
    """Per GPU count, the choice's cells (table_header): the strategy to book, its step (≥ where its full-size floor
    ranks it), the fastest of the rest that fits and how far behind, and what the pick rests on (where none fits,
    the batch a rank at which each would: memory_words.batch_words); the GPU-hours a million samples take given `batch`
    (without it, no such cell: table_header's `cost`); [] as `choose`; `made` as noted_rows takes it."""
    rows = noted_rows(state, frames, capacity_gib, optimizer_ms=optimizer_ms, step_ms=step_ms, errors=errors,
                      batch=batch, made=made)  # fmt: skip
    return [(*cells, "; ".join(note.said for note in notes)) for cells, notes in rows]


@dataclasses.dataclass(frozen=True)
class Note:
    """One thing a pick rests on: `said` whole (the page's cell); a console's cell says `short`, and once under its
    table `short: rest` with each GPU count's `figure`."""

    said: str
    short: str
    rest: str = ""
    figure: str = ""


def chosen(state: pd.DataFrame, frames: list[pd.DataFrame], capacity_gib: float, errors: dict | None = None,
           optimizer_ms: float = 0.0) -> tuple[list[Choice], dict[int, Choice]]:  # fmt: skip
    """(`choose`'s choices, and per GPU count the choice without `optimizer_ms` of each step: a CPU's optimizer time,
    {} where none is given): made once for the table and choice_words, which both say them."""
    choices = choose(state, frames, capacity_gib, errors)
    without = {c.world_size: c for c in choose(state, without_optimizer(frames, optimizer_ms), capacity_gib, errors)
               } if optimizer_ms and choices else {}  # fmt: skip
    return choices, without


def noted_rows(state: pd.DataFrame, frames: list[pd.DataFrame], capacity_gib: float, *, optimizer_ms: float = 0.0,
               step_ms: float = 0.0, errors: dict | None = None, batch: int | None = None,
               made: tuple[list[Choice], dict[int, Choice]] | None = None) -> list[tuple]:  # fmt: skip
    """`table_rows`' rows with what the pick rests on as `Note`s: (the cells before it, [Note, …]); `made`: `chosen`
    of these arguments, where the caller has it already. A strategy that failed parity in the run is in none of
    them (pick.parity), not even as what would fit at a smaller batch."""
    from harness.perfmodel.fits import roomy_batch
    from harness.perfmodel.memory_words import batch_words

    state = parity.passed(state)

    choices, without = made or chosen(state, frames, capacity_gib, errors, optimizer_ms)
    rows = []
    for c in choices:
        at = state[state["world_size"] == c.world_size]
        cells, notes = _cells(c, without.get(c.world_size), optimizer_ms=optimizer_ms, step_ms=step_ms, batch=batch,
                              tokens=tokens_a_step(state),
                              counted_in=(judged_dtype(at), half_dtype(at), at, capacity_gib),
                              errors=errors)  # fmt: skip
        if not c.picked and (words := batch_words(at, capacity_gib)):
            notes = [Note(words, words), *notes]
        roomy = dict(zip(at["strategy"], roomy_batch(at, capacity_gib), strict=True)) if len(at) else {}
        notes += [_tight(p, capacity_gib, roomy.get(p.strategy, 0), at) for p in c.picked if p.tight]
        rows.append((cells if batch else cells[:COST] + cells[COST + 1 :], notes))  # no batch: no GPU-hours
    return rows


def _cells(choice: Choice, without: Choice | None, *, optimizer_ms: float, step_ms: float, batch=None,
           tokens: float | None = None, counted_in: tuple = ("", "bf16"), errors=None) -> tuple:  # fmt: skip
    if not choice.picked:  # what the run never benched may fit: what a rank of theirs holds is unmeasured
        notes = [_unbenched_note(c, faster=False) for c in choice.unbenched]
        return (str(choice.world_size), "none modelled fits", "", "", "", ""), notes + _unfit(choice, counted_in)
    rest, behind = next_fits(choice)
    book = " or ".join(c.booked + " (tight)" * c.tight for c in choice.picked)  # not booked plainly: a note says
    cells = (str(choice.world_size), book,  # the cap where the floors rank it; a tight fit's room, its note
             step_cell(choice.picked, open_=bool(choice.open_on)), " or ".join(c.booked for c in rest),
             behind_cell(*behind) if rest else "",
             step_cell(choice.picked, gpu_hours_per_step_ms(batch=batch, tokens=tokens),
                       lambda v: f"{v:.3g}" if v < 1e3 else f"{v:,.0f}", open_=bool(choice.open_on))
             if batch else "")  # fmt: skip  # GPU-hours: no exponent in a table read by eye
    shown = list(dict.fromkeys(c for c in (*choice.picked, *rest) if c.bounded and c.model not in choice.open_on))
    ends = flip_ends(choice, *behind) if rest else ("", "")  # the next leads at one end: which, on the range's note
    ranged = [_bounded_note(c, ends if k == 0 else ("", "")) for k, c in enumerate(shown)]  # a range: said once
    return cells, _notes(choice, without, optimizer_ms=optimizer_ms, step_ms=step_ms, counted_in=counted_in,
                         errors=errors) + ranged  # fmt: skip


def next_fits(choice: Choice) -> tuple[list[Candidate], tuple[float, float]]:
    """The next that fits, judged as the pick is, over every corner of the own-cost bounds: the fastest of the rest at
    each corner (several where the corners differ: a run's FSDP from 94.95 ms, fastest of the rest without its own
    cost, and ZeRO-1's, with it), and how far the next is behind the pick, least and most over the corners."""
    rest = sorted((c for c in choice.others if c.fits and c.step_ms is not None), key=whole_step)
    if not rest:
        return [], (0.0, 0.0)
    ends = [(min(rest, key=lambda c, at=at: c.at(at)), at) for at in bounds.corners(choice.bounds)]
    lags = [first.at(at) / shown_step_at(choice, at) - 1 for first, at in ends]
    return list(dict.fromkeys(first for first, _ in ends)), (min(lags), max(lags))


def shown_step_at(choice: Choice, corner: dict) -> float:
    """The pick's step as its table cell shows it (step_cell) at a corner of the own-cost bounds: the cell's short
    end where no pick's own cost is at its long end there, else the cell's long end. The lag was read against the
    fastest pick's step at each corner, which no cell shows: 'behind +7.4–8.8%' beside a tie's '≥177.2–181.1' and
    the next's 192.9 (+6.5 % on 181.1, +8.9 % on 177.2)."""
    picked = choice.picked
    if all(corner.get(c.model, bounds.SHORT) == bounds.SHORT for c in picked if c.bounded):
        return min(c.step_ms for c in picked)
    return (min if choice.open_on else max)(map(whole_step, picked))


def flip_ends(choice: Choice, low: float, high: float) -> tuple[str, str]:
    """Where the next that fits leads the pick at one end only (`next_fits`' lags, `low` below 0, `high` above),
    which end is which, and what it waits on: ('level without FSDP's own cost, 3.9% behind with it at a CPU's',
    "open until FSDP's own cost is measured on a GPU (bench --gpus 1 --impls local,fsdp there)"), over the own costs
    of the strategies compared alone (a stock-vs-FSDP cell once named ZeRO's own cost too); ('', '') where the cell's
    sign holds at every corner. The pick holds at every corner, so where the next leads it, it does by less than the
    model can tell (choice._picked's band): level there, not 'behind -0.2%', which contradicted itself."""
    if not bounds.behind_text(low, high).startswith("-"):
        return "", ""
    rest = next_fits(choice)[0]
    compared = [m for m in choice.bounds if m in {c.model for c in (*choice.picked, *rest)}]
    lags = [(min(c.at(at) for c in rest) / shown_step_at(choice, at) - 1, at)
            for at in bounds.corners(compared)]  # fmt: skip
    (_, at_least), (most, at_most) = min(lags, key=lambda lag: lag[0]), max(lags, key=lambda lag: lag[0])
    again = list(at_least) == list(at_most)
    ends = (f"level {bounds.end_words(at_least, whose=choice.whose)}, "
            f"{bounds.percent(most)} behind {bounds.end_words(at_most, again=again, whose=choice.whose)}")  # fmt: skip
    return ends, bounds.own_cost_open(compared)


def behind_cell(low: float, high: float) -> str:
    """'+5.3%', or over the own-cost bounds' corners '+0.1–105.1%'; 'level to +4.5%' where the next leads at one end,
    by less than the pick's tie (flip_ends): a cell '-0.4% to +4.5%' beside a single pick read as a lead."""
    said = bounds.behind_text(low, high)
    return f"level to +{bounds.percent(high)}" if said.startswith("-") else f"+{said}"


def _bounded_note(c: Candidate, ends: tuple[str, str] = ("", "")) -> Note:
    """A step shown as a range: from none of its own cost (a GPU's, unmeasured) to a CPU's, scaled; how much, the
    console says once on the strategy's own line (own_costs.fsdp_for_cluster's, own_costs.zero_for_cluster's note), the
    page in its caveats (a walkthrough's table read fsdp +246 % behind, a note under it a tie without a CPU's own cost,
    and the FSDP line that cost left out); `ends`: where the next leads at one end only, which (`flip_ends`), its
    figure, and what it waits on, said once under a console's table."""
    said, (figure, waits) = f"{c.strategy}'s step {bounds.own_range(c.whose)}", ends
    return Note(f"{said}; {figure}: {waits}" if figure else said, said, waits if figure else "", figure)


def _notes(choice: Choice, without: Choice | None, *, optimizer_ms: float, step_ms: float,
           counted_in: tuple = ("", "bf16"), errors=None) -> list[Note]:  # fmt: skip
    """What the pick rests on, each a `Note`."""
    missed = f"a lead under {choice.apart:.0%} is within how far the step models missed this run's own steps"
    tie = missed if choice.apart else f"a lead under {agreement.SMALL_CAP_LEAD:.0%} is more than the model can tell"
    notes = [Note(f"a tie: {tie}", "a tie", tie)] if len(choice.picked) > 1 and not choice.open_on else []
    if turns := turning_share(choice, without, optimizer_ms=optimizer_ms, step_ms=step_ms, errors=errors):
        settles = "--local-optimizer-ms, with --local-step-ms, settles it"
        notes.append(Note(f"holds{turns} ({settles})", "the optimizer's share decides", settles, f"holds{turns}"))
    if choice.open_on:  # the pick flips inside the own-cost bounds (a CPU's own cost is no GPU's): no booking yet
        ends = bounds.open_words(choice).partition(": ")[2]
        short, bench = bounds.own_cost_open(choice.open_on, bench=False), bounds.own_cost_bench(choice.open_on)
        notes.append(Note(bounds.open_words(choice), short, f"{bench} on a GPU measures it", ends))  # the cell short
    for c in (c for c in choice.picked if c.note):
        shared, _, exposed = c.note.removesuffix(f"; {LOSSY}").partition(EXPOSED)  # the figures apart: by GPU count
        rest = "; ".join(part for part in (shared, LOSSY if c.note.endswith(LOSSY) else "") if part)
        notes.append(Note(f"{c.strategy}: {c.note}", c.strategy, rest, f"exposed {exposed}" if exposed else ""))
    notes += [_unbenched_note(c, faster=True, where="" if choice.faster_at_every_corner(c) else bounds.end_words(
        choice.lead_ends(c)[0], whose=choice.whose)) for c in choice.unbenched]  # fmt: skip
    return notes + _unfit(choice, counted_in)


def judged_dtype(at: pd.DataFrame) -> str:
    """What the rows' activations were counted in where the fit turns on it: 'fp32', the run's (a CPU run's default:
    a GPU trains in bf16, whose activations differ), or the dtype predict counted them in for the GPU ('bf16':
    memory's `activation_dtype`, where not the run's); '' otherwise."""
    if "dtype" not in at or not len(at) or not (at["dtype"] == "fp32").all():
        return ""
    judged = {d or "fp32" for d in at["activation_dtype"].fillna("")} if "activation_dtype" in at else {"fp32"}
    return judged.pop() if len(judged) == 1 else ""


def half_dtype(at: pd.DataFrame) -> str:
    """The half precision the GPU the fit is for autocasts in (the rows' `gpu_half_dtype`: precision.trains_in's, fp16
    on a V100); bf16 where the rows do not say."""
    said = at["gpu_half_dtype"].dropna() if "gpu_half_dtype" in at else ()
    return str(said.iloc[0]) if len(said) and said.iloc[0] else "bf16"


def _unfit(choice: Choice, counted_in: tuple = ("", "bf16")) -> list[Note]:
    """'stock, zero do not fit', where any modelled one does not, with each one's need as its sum (`overflow_words`,
    of the state rows at its GPU count, counted_in's third, against its fourth, the GPU's memory); the activations'
    dtype where the fit turns on it (`counted_in`: judged_dtype's and the GPU's half precision, half_dtype's): 'in
    fp32', a CPU run's default, which a GPU trains in bf16, whose activations differ (a walkthrough's 7B model read
    'zero does not fit' at 143 GiB from fp32's 61 GiB of activations; benched in bf16 it fit at 134 and was the pick
    at 8 GPUs), a V100 in fp16 (dgx1-v100 read 'bf16's differ: bench --dtype bf16' of a GPU without bf16); 'in bf16'
    where predict counted them so for the GPU (--dtype auto's there): the activations alone, the state held as the
    run held it."""
    (dtype, half, *at), unfit = counted_in, sorted(c.strategy for c in choice.others if not c.fits)
    if not unfit:
        return []
    said = f"{', '.join(unfit)} do{'es' * (len(unfit) == 1)} not fit"
    held = overflow_words(at[0], unfit, *at[1:]) if at else ""
    why = f"activations in {dtype}" if dtype and dtype != "fp32" else ""
    if dtype == "fp32":
        said += " in fp32"
        why = f"the run's dtype, its activations counted so; {half}'s differ: {bench_in(half)} to count them"
    whole = "; ".join(part for part in (held, why) if part)
    return [Note(f"{said} ({whole})" if whole else said, said, why, held)]


def overflow_words(at: pd.DataFrame, strategies: list[str], capacity_gib: float = 0.0) -> str:
    """'over 39.39 GiB: stock 39.9 GiB = 20 GiB of model state + 14.9 GiB of activations + 5.01 GiB of gradient
    buckets; with --opt gradient_as_bucket_view=True 34.9 GiB, which fits, at DDP's step': what each strategy's
    rank needs at its step's peak (need_mb) as the sum it is, its model state and the larger of backward's part and
    the optimizer step's (strategies alike said once), against `capacity_gib`; where DDP's bucket copy is what
    overflows, the need without it, which gradient_as_bucket_view gives, at DDP's step (its all-reduces are DDP's).
    A 1.3B Llama's read 'stock 14.9 GiB of activations', its largest part, of an overflow that was a sum, 1.3 % over,
    5.01 GiB of it buckets; '' where the rows do not tell the state by kind. The flag is spelt as the labels beside it
    spell the option ('stock gradient_as_bucket_view=False'), which --opt takes as it is (it once read '=true')."""
    from harness.analysis import roles
    from harness.perfmodel.memory import mib_text, need_mb

    if "held_optimizer_state_mb" not in at:  # the state not told by kind: nothing to name
        return ""
    said: dict[str, list[str]] = {}
    for strategy in strategies:
        rows = at[at["strategy"] == strategy].head(1) if "strategy" in at else at.iloc[:0]
        if rows.empty or rows["activation_mb"].isna().all():
            continue
        row = rows.iloc[0]

        def mb(column: str, _row=row) -> float:
            value = _row.get(column, 0.0)
            return float(value) if value == value and value is not None else 0.0

        backward = {"activations": max(mb("activation_mb"), mb("hook_copies_mb")), "gradient buckets":
                    mb("buckets_mb"), "held unsharded": mb("unsharded_mb"),
                    "its sync's declared temporaries": mb("sync_temp_mb")}  # fmt: skip
        step = {
            "the optimizer's temporaries": mb("optimizer_temp_mb"),
            "gradient buckets": mb("step_buckets_mb") if "step_buckets_mb" in row else mb("buckets_mb"),
        }
        parts = backward if sum(backward.values()) >= sum(step.values()) else step  # need_mb's larger
        parts = {"model state": mb("total_mb") + mb("hook_state_mb"), **parts}
        summed = " + ".join(f"{mib_text(v)} {'' if what == 'held unsharded' else 'of '}{what}"
                            for what, v in parts.items() if v > 0)  # fmt: skip
        text = f"{mib_text(float(need_mb(rows).iloc[0]))} = {summed}"
        viewed = float(need_mb(rows.assign(buckets_mb=0.0, step_buckets_mb=0.0)).iloc[0])
        reference = bool(roles.is_reference(roles.with_roles(rows)).iloc[0]) if "impl" in rows else False
        if capacity_gib and reference and mb("buckets_mb") > 0 and viewed <= capacity_gib * 1024:
            text += f"; with --opt gradient_as_bucket_view=True {mib_text(viewed)}, which fits, at DDP's step"
        said.setdefault(text, []).append(strategy)
    over = f"over {capacity_gib:g} GiB: " * bool(capacity_gib and said)
    return over + ", ".join(f"{' and '.join(names)} {text}" for text, names in said.items())


def _unbenched_note(c: Candidate, *, faster: bool, where: str = "") -> Note:
    """A modelled strategy the run never benched: predicted faster than the pick (`faster`; at one end only where
    `where` names it, bounds.end_words: below the pick's step with all its own cost in, not below it without), or
    where nothing benched fits, predicted at all; what a rank of it holds, so whether it fits, needs a bench of it."""
    what = "predicted " + ("faster" + f" {where}" * bool(where) if faster else "")
    step, what = f"{'≥' * (c.profiled_ms is not None)}{c.step_ms:.4g} ms", what.strip()
    bench = f"bench it (--impls {c.strategy.replace(', ', ',')}) to see what a rank holds"
    return Note(f"{c.strategy} {what} ({step}) but not benched: {bench}", f"{c.strategy} not benched",
                f"{what}, but not benched: {bench}", step)  # fmt: skip


def _tight(c: Candidate, capacity_gib: float, roomy: int, at: pd.DataFrame) -> Note:
    """A pick that fits only tightly (fits.is_tight), said: what it leaves, and the batch a rank at which it would
    fit with room (fits.roomy_batch), where one would."""
    from harness.perfmodel.memory import mib_text
    from harness.perfmodel.memory_words import tight_why

    batch = at.loc[at["strategy"] == c.strategy, "batch_size"] if "batch_size" in at else pd.Series(dtype=float)
    room = f", batch {roomy} a rank fits with room" if 0 < roomy < (batch.max() if len(batch) else 0) else ""
    left = f"{mib_text(capacity_gib * 1024 - c.need_mb)} left{room}"
    return Note(f"{c.strategy} fits tight ({left}; {tight_why()})", f"{c.strategy} fits tight", tight_why(), left)


def step_cell(picked: list[Candidate], scale: float = 1.0, text=lambda value: f"{value:.4g}", *,
              open_: bool = False) -> str:  # fmt: skip
    """'≥269.2' (a full-size floor ranks it), a tie's span '269.2–351.7', a step bounded by its own cost (a CPU's)
    from its short end to its long; `open_` (picks left open on an own cost: Choice.open_on), the step booked once
    that cost is measured, the fastest pick's at each end (fsdp 90–110 or stock 100: 90–100, as the bookings book
    it; it read 90–110, a step no one would book); each step × `scale` (GPU-hours a million
    samples take: step s × 10⁶ / the batch a GPU steps at / 3,600 s, the GPUs' count cancelling out; a billion
    tokens: step s × 10⁹ / the tokens a GPU steps on / 3,600 s)."""
    span = bounds.span_text(min(c.step_ms for c in picked) * scale, (min if open_ else max)(map(whole_step, picked))
                            * scale, text)  # fmt: skip
    return "≥" * any(c.profiled_ms is not None for c in picked) + span  # a bounded step: its own cost's long end
