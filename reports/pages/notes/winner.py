"""The answer's winner in words: the headline a reader may read alone, the lead over the next in full, the step
against stock as DDP ships it (the reference, or the stand-in named for what it is), and the index's compact
doubt. Pure: one world size's ranked rows (pooled.ranked) in, sentences out.

A winner is named with its evidence (docs/statistics.md): "fastest" and "N× faster" carry the repeats'
interval, and say "leads …, no 5% change shown" or "too few repeats to tell" where the repeats cannot back
them."""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles, stats
from harness.analysis.verdicts import decide
from harness.results.values import parity_words
from reports.aggregate import world_label
from reports.pages.evidence import (
    NO_CHANGE_SHOWN,
    NOT_SIGNIFICANT,
    SIGNIFICANT,
    TOO_FEW,
    a_verdicts_pair,
    caps_alone_spread,
    caps_of_one_sweep,
    evidence,
    interval_text,
    inverted,
    one_layout_pooled,
    swept_caps,
    too_few_text,
)
from reports.pages.html import esc
from reports.pages.legend import deployable, passed_over
from reports.pages.pooled import MISSING


def milliseconds(ms: float | None) -> str:
    if ms is None:
        return MISSING
    return f"{ms:.1f} ms" if ms >= 100 else f"{ms:.2f} ms"


def step_said(row: pd.Series, unit: str = "") -> str:
    """'17.07 ms', or for caps of one layout as one row (one_layout_pooled) '17.07 ms, both caps' launches pooled':
    a figure no one cap holds (each launch's geometric mean of its caps' medians), said to be pooled;
    `unit` after the figure ('17.07 ms a step, both …')."""
    caps = row.get("pooled_caps")
    if not isinstance(caps, list):
        return milliseconds(row["step_ms"]) + unit
    return f"{milliseconds(row['step_ms'])}{unit}, {'both' if len(caps) == 2 else f'its {len(caps)}'} caps' " + (
        "launches pooled"
    )


def reference_row(group: pd.DataFrame) -> pd.Series | None:
    """The reference (stock) as DDP ships it: no option at all (first bucket 1 MiB, then 25 MiB). Without
    one, the reference at an explicit 25 MiB cap and nothing else stands in, named for what it is
    (reference_name): since torch 2.9 an explicit cap caps the first bucket too, so it is not DDP's default."""
    stock = group[group["reference"].astype(bool)]
    needed = roles.needed_by_every(stock["impl"], stock["options"])  # every stock row's find_unused_parameters=True
    ranked_rows = [(roles.reference_rank(row["options"], row["impl"], needed=needed), i) for i, row in stock.iterrows()]
    ranked_rows = sorted((rank, i) for rank, i in ranked_rows if rank is not None)
    return stock.loc[ranked_rows[0][1]] if ranked_rows else None


def reference_name(reference: pd.Series | None) -> str:
    """'stock' for DDP as shipped; 'stock bucket_cap_mb=25 (first bucket 25 MiB)' for the stand-in; 'stock
    find_unused_parameters=True' where every stock row set it (roles.needed_by_every)."""
    if reference is None:
        return roles.reference_name()
    asked = roles.beyond_defaults(reference["impl"], reference["options"])  # the first bucket: said where capped
    if reference.get("pooled_caps") or "bucket_cap_mb" not in asked:
        return reference["strategy"]  # 'stock', the options a sweep asked at their defaults, or caps of one layout
    first = reference.get("first_bucket_cap_mb")
    first_bucket = "first bucket not recorded" if first is None else f"first bucket {float(first):g} MiB"
    return f"{reference['strategy']} ({first_bucket})"


def lead(group: pd.DataFrame) -> tuple[str, str]:
    """The fastest communicating strategy and what the repeats say of it, as (its name, the rest):
    ('bucketed', " is fastest (3.10 ms): 0.77× the step of the next, stock (1.30× faster; 95% interval 0.67–0.91)"), or
    ' leads (…), no 5% change shown: …', or ' leads (…); too few repeats to tell it from …'.
    Against stock too, where stock is not the one it beat. Caps of one layout are one (one_layout_pooled). Plain text
    (the caller escapes it)."""
    group = one_layout_pooled(group)
    contenders = deployable(measured := group[~group["is_floor"]])
    best, over = contenders.iloc[0], f"; {words}" if (words := passed_over(measured)) else ""
    if len(contenders) == 1:
        return best["strategy"], f" is the only strategy {'to deploy ' * bool(over)}measured ({step_said(best)}){over}"
    reference = reference_row(group)
    runner = contenders.iloc[1]
    runner_name = reference_name(reference) if runner["strategy"] == _name(reference) else runner["strategy"]
    proof = evidence(best, runner)  # ranked by the estimate the ratio is built around: times ≥ 1
    own = inverted(proof)  # the leader's step over the next's, as every ratio on the page and the console runs
    at = step_said(best)
    interval = interval_text(own) if proof["low"] is not None else ""
    next_step = f"the step of the next, {runner_name}"
    if proof.get("same_buckets"):
        words = (f" leads ({at}); {runner_name} makes the same buckets, so the two are one measurement "
                 f"({proof['times']:.2f}× apart: the launches' spread)")  # fmt: skip
    elif int(best["world_size"]) == 1:  # whatever its repeats showed, as the table's cell: no verdict is about it
        interval = interval_text(own) if own["low"] is not None else ""
        words = (f" leads ({at}); {ONE_RANK}: against the next, {runner_name}, an estimate "
                 f"{decide.versus(own['times'], decide.step_of(runner_name), interval=interval)}")  # fmt: skip
    elif proof["judged"] == SIGNIFICANT:
        fastest = "fastest to deploy" if over else "fastest"
        words = f" is {fastest} ({at}): {decide.versus(own['times'], next_step, interval=interval)}"
    elif proof["judged"] == NOT_SIGNIFICANT:
        words = f" leads ({at}), {NO_CHANGE_SHOWN}: {decide.versus(own['times'], next_step, interval=interval)}"
    else:
        verdict = a_verdicts_pair(best, runner, reference, contenders)
        doubt = too_few_text(own, pair=not verdict)
        words = (f" leads ({at}); too few repeats to tell it from {runner_name}, the next: so far "
                 f"{decide.versus(own['times'], decide.step_of(runner_name), interval=doubt)}")  # fmt: skip
        if reference is not None and not verdict and not caps_of_one_sweep(best, runner):
            words += f" (a lead the run does not decide: its verdicts hold each strategy against {_name(reference)})"
        elif not verdict and swept_caps(best, contenders) & {stats.REFERENCE_CAP_MB}:
            words += (f" (a lead the run does not decide: its cap verdict holds each cap against the "
                      f"{stats.REFERENCE_CAP_MB:g} MiB cap)")  # fmt: skip
    if reference is not None and reference["strategy"] not in (best["strategy"], runner["strategy"]):
        words += ", and " + versus_stock(best, reference)
    return best["strategy"], words + over


def _name(row: pd.Series | None) -> str | None:
    return None if row is None else row["strategy"]


def versus_stock(best: pd.Series, reference: pd.Series) -> str:
    """ "faster than stock: 0.61× stock's step (1.63× faster; 95% interval 0.48–0.83)" (the run's verdict, as the
    console says it), '… , no 5% change shown', or 'too few repeats to tell it from stock: so far …'; at one rank,
    which no verdict is about, 'against stock, an estimate …'. `best` ranks above the reference: its step over
    stock's (decide.versus)."""
    proof = evidence(best, reference)
    name = reference_name(reference)
    if proof.get("same_buckets"):  # one measurement: no faster or slower to say
        return f"the same buckets as {name}: one measurement ({proof['times']:.2f}× apart: the launches' spread)"
    own = inverted(proof)
    if int(best["world_size"]) == 1:  # ONE_RANK: an estimate, never 'faster' or 'no change shown'
        interval = interval_text(own) if own["low"] is not None else ""
        return f"against {name}, an estimate " + decide.versus(own["times"], decide.step_of(name), interval=interval)
    if proof["judged"] == TOO_FEW:
        return f"too few repeats to tell it from {name}: so far " + decide.versus(
            own["times"], decide.step_of(name), interval=too_few_text(own)
        )
    said = decide.versus(
        own["times"], decide.step_of(name), interval=interval_text(own) if own["low"] is not None else ""
    )  # significant: the run's own verdict (decide's, by the same test), 'faster', in its words
    return (said + f", {NO_CHANGE_SHOWN}") if proof["judged"] == NOT_SIGNIFICANT else f"faster than {name}: {said}"


def lead_caveat(group: pd.DataFrame) -> str:
    """The index's compact form of lead()'s doubt: '' when the repeats back the winner, else 'leads; no 5%
    change shown', 'leads; too few repeats', 'leads; not judged' (one rank) or, two caps that made one layout,
    'leads; the same buckets as the next'."""
    contenders = deployable(one_layout_pooled(group)[lambda rows: ~rows["is_floor"]])
    if len(contenders) < 2:
        return ""
    proof = evidence(contenders.iloc[0], contenders.iloc[1])
    if proof.get("same_buckets"):
        return "leads; the same buckets as the next"
    if int(contenders.iloc[0]["world_size"]) == 1:  # ONE_RANK: no verdict is about it, whatever its repeats showed
        return "leads; not judged"
    return {SIGNIFICANT: "", NOT_SIGNIFICANT: f"leads; {NO_CHANGE_SHOWN}", TOO_FEW: "leads; too few repeats"}[
        proof["judged"]
    ]


def headline(group: pd.DataFrame, control: float | None = None) -> str:
    """The answer in one sentence, which a reader may read alone: the strategy (its cap in its name), the step it
    buys against stock, decided or not against the next: 'At 2 ranks: <b>bucketed</b> is fastest: 3.10 ms a step,
    1.24× faster than stock; decided over 5 repeats; parity ok.' ('leads: …; not decided: too few repeats to tell it
    from the next, flat (have 1, need about 7)', 'tied with the next, …'; at one rank, where too few repeats judges
    nothing: 'leads: …, an estimated 1.43× faster than stock; one rank is not judged: …'). The intervals against
    stock are the table's column, the lead over the next in full section 1's sentence (lead). Caps of one strategy
    alone (caps_alone_spread) are not ranked at one rank, where they have nothing to all-reduce; elsewhere their
    spread is said beside `control`'s, one rank's."""
    group = one_layout_pooled(group)  # caps of one bucket layout: one configuration, not a cap to name
    contenders = deployable(measured := group[~group["is_floor"]])  # the leader named: one to deploy
    if contenders.empty:
        return f"At {world_label(int(group['world_size'].iloc[0]))}: only the no-communication floor was measured."
    best = contenders.iloc[0]
    parity = esc(parity_words(best))  # a lossy hook's: why and by how much, not a bare 'not judged'
    noisy = f"; {best['noise']}" if best["noise"] else ""
    noisy += f"; {over}" if (over := passed_over(measured)) else ""  # an instrument ranked above it, said so
    start = f"At {world_label(int(best['world_size']))}: <b>{esc(best['strategy'])}</b>"
    if len(contenders) == 1:
        only = "only strategy to deploy" if over else "only strategy"
        return f"{start} is the {only} measured ({esc(step_said(best))}); {parity}{esc(noisy)}."
    if (spread := caps_alone_spread(contenders)) is not None and int(best["world_size"]) == 1:
        least, most = (milliseconds(contenders["step_ms"].agg(how)) for how in ("min", "max"))
        steps = f"{least.removesuffix(' ms')}–{most} a step"
        return (f"At 1 rank: <b>{esc(best['impl'])}</b>'s caps have nothing to all-reduce: their {spread:.2f}× spread "
                f"({esc(steps)}) is this machine's noise; {parity}{esc(noisy)}.")  # fmt: skip
    if spread is not None and control is not None:  # how much of it the one-rank control shows too
        noisy = (f"; {best['impl']}'s caps spread {spread:.2f}× here, {control:.2f}× at 1 rank with nothing to "
                 f"all-reduce{noisy}")  # fmt: skip
    reference, runner = reference_row(group), contenders.iloc[1]
    stock_next = runner["strategy"] == _name(reference)
    runner_name = reference_name(reference) if stock_next else runner["strategy"]
    proof = evidence(best, runner)
    one_rank = int(best["world_size"]) == 1  # never judged, whatever its repeats showed: the table's cell says so
    judged = "same" if proof.get("same_buckets") else ONE_RANK if one_rank else proof["judged"]
    buys = step_said(best, " a step")
    if reference is not None and best["strategy"] != reference["strategy"]:  # the step against stock: the table's
        buys += "" if stock_next and judged in ("same", NOT_SIGNIFICANT) else _against_stock(best, reference)
    own = inverted(proof)  # the leader's step over the next's
    faster = f"{words} than" if (words := decide.faster_words(own["times"])) else f"{own['times']:.2f}× the step of"
    next_one = f"the next, {runner_name}"
    repeats = f" over {proof['repeats']} repeats" if proof.get("repeats") else ""
    if judged == "same":
        verb, verdict = "leads", f"{next_one}, makes the same buckets: one measurement"
    elif judged == ONE_RANK:  # never judged: a need or a 'decided' would read as a verdict the run gave
        verb, verdict = "leads", ONE_RANK
    elif judged == SIGNIFICANT:
        verb, verdict = (
            "is fastest" + " to deploy" * bool(over),
            f"decided{repeats}" + ("" if stock_next else f": {faster} {next_one}"),
        )
    elif judged == NOT_SIGNIFICANT:
        verb, verdict = "leads", f"tied with {next_one}: {NO_CHANGE_SHOWN}"
    else:
        pair = "" if a_verdicts_pair(best, runner, reference, contenders) else "these two "  # evidence.too_few_text
        need = stats.needed_text(proof["needed"], proof["repeats"])  # a rough guide under 5 repeats, as the console's
        have = f"have {proof['repeats']}, {pair}{need}" if proof.get("needed") else ""
        whom = "" if stock_next else f" to tell it from {next_one}"
        verb, verdict = "leads", f"not decided: too few repeats{whom} ({have or '--repeats 2 or more'})"
    return f"{start} {verb}: {esc(buys)}; {esc(verdict)}; {parity}{esc(noisy)}."


ONE_RANK = "one rank is not judged: nothing communicates"


def _against_stock(best: pd.Series, reference: pd.Series) -> str:
    """', 1.77× faster than stock' (', so far …' where the repeats are too few to tell, ', an estimated …' at one
    rank, which is never judged; the interval: the table's)."""
    proof = evidence(best, reference)
    name = reference_name(reference)
    if proof.get("same_buckets"):
        return f", the same buckets as {name}"
    times = inverted(proof)["times"]
    faster = decide.faster_words(times)
    if int(best["world_size"]) == 1:  # ONE_RANK: an estimate, whatever its repeats showed
        return (
            f", an estimated {faster} than {name}" if faster else f", an estimated {times:.2f}× {decide.step_of(name)}"
        )
    if not faster or proof["judged"] == NOT_SIGNIFICANT:
        return f", {NO_CHANGE_SHOWN} against {name}"
    doubt = {TOO_FEW: "so far "}.get(proof["judged"], "")
    return f", {doubt}{faster} than {name}"
