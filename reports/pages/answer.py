"""The run page's answer, before any figure: per workload and world size, the strategies ranked by
step time (repeats pooled), each against stock as DDP ships it, with the recommended bucket cap,
parity and a noise flag; then a one-line headline per world size. Pure: DataFrames in, HTML out.

A winner is named with its evidence (the repeat is its unit, docs/statistics.md): "fastest" and "N× faster"
carry the repeats' interval, and say "leads …, no 5% change shown" or "too few repeats to tell" where the
repeats cannot back them. Ranks, ratios, verdicts and the sweep's cap all rest on one estimate, the
geometric mean of the repeats' medians, so that no row ranked first is "slower" than the one below it.
Columns a run does not have (older schemas) show as "—".
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from harness.analysis import roles, stats
from harness.analysis.verdicts import decide, sweep
from harness.results.values import options_of, parity_words
from reports.aggregate import RunData, precision, world_label
from reports.pages import alerts
from reports.pages.evidence import (
    CAPTION,
    CELL_DOUBT,
    NO_CHANGE_SHOWN,
    NOT_SIGNIFICANT,
    POOLED_CAPS,
    SIGNIFICANT,
    STAND_IN,
    TOO_FEW,
    a_verdicts_pair,
    caps_alone_spread,
    caps_of_one_sweep,
    evidence,
    interval_text,
    inverted,
    levels_note,
    one_layout_pooled,
    swept_caps,
    too_few_text,
)
from reports.pages.html import HEADING_NAME, esc, name_html, table
from reports.pages.legend import deployable, passed_over, predict_links, strategies_legend
from reports.pages.notes import floor, hidden
from reports.pages.optimizer_lead import optimizer_lead
from reports.pages.pooled import MISSING, ranked, run_confidence, value


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


def any_pooled(group: pd.DataFrame) -> bool:
    """Whether one_layout_pooled made one row of some strategy's caps in `group` (its answer rows, pooled)."""
    return "pooled_caps" in group and bool(group["pooled_caps"].map(lambda caps: isinstance(caps, list)).any())


def reference_row(group: pd.DataFrame) -> pd.Series | None:
    """The reference (stock) as DDP ships it: no option at all (first bucket 1 MiB, then 25 MiB). Without
    one, the reference at an explicit 25 MiB cap and nothing else stands in, named for what it is
    (reference_name): since torch 2.9 an explicit cap caps the first bucket too, so it is not DDP's default."""
    stock = group[group["reference"].astype(bool)]
    ranked_rows = [(roles.reference_rank(row["options"], row["impl"]), i) for i, row in stock.iterrows()]
    ranked_rows = sorted((rank, i) for rank, i in ranked_rows if rank is not None)
    return stock.loc[ranked_rows[0][1]] if ranked_rows else None


def reference_name(reference: pd.Series | None) -> str:
    """'stock' for DDP as shipped; 'stock bucket_cap_mb=25 (first bucket 25 MiB)' for the stand-in."""
    if reference is None:
        return roles.reference_name()
    if reference.get("pooled_caps") or not roles.beyond_defaults(reference["impl"], reference["options"]):
        return reference["strategy"]  # 'stock', the options a sweep asked at their defaults, or caps of one layout
    first = reference.get("first_bucket_cap_mb")
    first_bucket = "first bucket not recorded" if first is None else f"first bucket {float(first):g} MiB"
    return f"{reference['strategy']} ({first_bucket})"


def against_reference(row: pd.Series, reference: pd.Series | None) -> str:
    """'0.81× (1.24× faster; 0.70–0.93)', '1.30× (1.10–1.50)', '0.99× (1.01× faster; 0.96–1.04), no 5% change shown',
    'too few repeats to tell (estimate 0.81×, 1.24× faster, interval 0.56–1.17)' ('not judged (…)' at one rank,
    which no verdict is about: ONE_RANK): this one's step over stock's (decide.versus, as the console's verdicts say
    it), with the interval over repeats of that ratio."""
    if reference is None:
        return MISSING
    if row["strategy"] == reference["strategy"]:
        return "reference"
    proof = evidence(row, reference)
    faster = proof["times"] >= 1  # by the estimate the interval is built around, so that it lies inside
    if proof.get("same_buckets"):  # one measurement: its two figures differ by the launches alone
        apart = proof["times"] if faster else evidence(reference, row)["times"]
        return f"the same buckets: one measurement ({apart:.2f}× apart: the launches' spread)"
    own = inverted(proof) if faster else evidence(reference, row)  # this row's step over the reference's
    interval = sweep.ratio_interval_text(own["low"], own["high"]) if own["low"] is not None else ""
    if own["judged"] == TOO_FEW:  # the doubt first: the estimate is no finding yet
        said = [f"{own['times']:.2f}×", decide.faster_words(own["times"]), interval and f"interval {interval}"]
        doubt = "not judged" if int(row["world_size"]) == 1 else "too few repeats to tell"  # ONE_RANK: no verdict
        return f"{doubt} (estimate {', '.join(words for words in said if words)})"
    return decide.versus(own["times"], interval=interval) + CELL_DOUBT[own["judged"]]


def recommendation_text(
    recommendations: pd.DataFrame, *, workload: str, impl: str, world: int, options: dict | None = None
) -> str | None:
    """The sweep's verdict for one strategy (impl and, where given, its options other than the cap) at one
    world size: 'use bucket_cap_mb=5', 'flat: any of 1, 5, 25 MiB', or None. A table without the options
    that names the impl twice (two hooks swept) cannot say which verdict is this one's: None."""
    if world == 1:
        return None
    if recommendations.empty or "impl" not in recommendations:
        return None
    rows = recommendations[(recommendations["impl"] == impl) & (recommendations["workload"] == workload)
                           & (recommendations["world_size"] == world)]  # fmt: skip
    if options is not None and "other_options" in rows:
        rows = rows[rows["other_options"].map(_canonical) == _canonical(options)]
    if len(rows) != 1:
        return None
    row = rows.iloc[0]
    if isinstance(value(row, "decision"), str):  # the sweep's decision over repeats (docs/statistics.md)
        return sweep.answer(row, why=False)  # the buckets every cap made: the line above says
    best = value(row, "best_cap_mb")
    as_good = _caps(value(row, "equivalent_caps_mb"))
    if best is None:
        return None
    if len(as_good) > 1 and stats.REFERENCE_CAP_MB in as_good:  # the 25 MiB cap is as good as the best
        return "flat: any of " + ", ".join(f"{c:g}" for c in as_good) + " MiB"
    return f"{best:g} MiB"


def _canonical(options: Any) -> str:
    """A strategy's options but the cap, as the sweep keys them (its `other_options`)."""
    parsed = options_of(options)
    return json.dumps({k: v for k, v in parsed.items() if k != "bucket_cap_mb"}, sort_keys=True)


def _caps(text: Any) -> list[float]:
    if text is None:
        return []
    caps = json.loads(text) if isinstance(text, str) else list(text)
    return sorted(float(c) for c in caps)


def parity_cell(row: pd.Series) -> str:
    words = parity_words(row, why=not row["is_floor"]).removeprefix("parity ")  # a lossy hook's: why, how far
    return "<b>FAILED</b>" if row["parity_ok"] is False else esc(words)


def noise_cell(row: pd.Series) -> str:
    """The step CV as stats.noise_note judges it (the median over repeats), and why it is noisy if it is."""
    if row["cv"] is None and not row["noise"]:
        return MISSING
    steady = f"steady (cv {stats.cv_text(row['cv'])})" if row["cv"] is not None else "steady"
    by_cap = row.get("noise_by_cap")  # caps of one layout as one row (one_layout_pooled): each cap's note
    return f"<b>noisy</b>: {esc(by_cap if isinstance(by_cap, str) else row['noise'])}" if row["noise"] else steady


def world_table(group: pd.DataFrame, recommendations: pd.DataFrame, *, workload: str) -> str:
    group = one_layout_pooled(group)  # ranked as the headline ranks: caps of one bucket layout are one row
    reference = reference_row(group)
    rows, classes, shown_caps = [], [], set()
    rank, leader = 0, deployable(group[~group["is_floor"]]).index[:1]  # bold: the one the headline names
    for _, row in group.iterrows():
        rank += not row["is_floor"]
        cap = MISSING
        strategy = (row["impl"], _canonical(row["options"]))
        if strategy not in shown_caps:  # the verdict once per strategy, on its fastest row
            shown_caps.add(strategy)
            cap = esc(recommendation_text(recommendations, workload=workload, impl=row["impl"],
                                          world=int(row["world_size"]), options=row["options"]) or MISSING)  # fmt: skip
        rows.append([
            "floor" if row["is_floor"] else str(rank),
            f"<b>{esc(row['strategy'])}</b>" if row.name in leader else esc(row["strategy"]),
            milliseconds(row["step_ms"]), esc(against_reference(row, reference)), cap,
            hidden.hidden_cell(row), parity_cell(row), noise_cell(row),
        ])  # fmt: skip
        classes.append("failed" if row["parity_ok"] is False else ("noisy" if row["noise"] else ""))
    head = ["#", "strategy", "step (geometric mean of repeats)", f"× {decide.step_of(reference_name(reference))}",
            "bucket cap to use",
            "comm. hidden (over repeats)", "parity", "noise (median CV of repeats)"]  # fmt: skip
    return table(head, rows, row_classes=classes)


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
    elif proof["judged"] == SIGNIFICANT:
        fastest = "fastest to deploy" if over else "fastest"
        words = f" is {fastest} ({at}): {decide.versus(own['times'], next_step, interval=interval)}"
    elif proof["judged"] == NOT_SIGNIFICANT:
        words = f" leads ({at}), {NO_CHANGE_SHOWN}: {decide.versus(own['times'], next_step, interval=interval)}"
    elif int(best["world_size"]) == 1:  # no verdict is about it: no need to name, no repeats to add
        interval = interval_text(own) if own["low"] is not None else ""
        words = (f" leads ({at}); {ONE_RANK}: against the next, {runner_name}, an estimate "
                 f"{decide.versus(own['times'], decide.step_of(runner_name), interval=interval)}")  # fmt: skip
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
    console says it), '… , no 5% change shown', or 'too few repeats
    to tell it from stock: so far …'. `best` ranks above the reference: its step over stock's (decide.versus)."""
    proof = evidence(best, reference)
    name = reference_name(reference)
    if proof.get("same_buckets"):  # one measurement: no faster or slower to say
        return f"the same buckets as {name}: one measurement ({proof['times']:.2f}× apart: the launches' spread)"
    own = inverted(proof)
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
    change shown', 'leads; too few repeats' or, two caps that made one layout, 'leads; the same buckets as the next'."""
    contenders = deployable(one_layout_pooled(group)[lambda rows: ~rows["is_floor"]])
    if len(contenders) < 2:
        return ""
    proof = evidence(contenders.iloc[0], contenders.iloc[1])
    if proof.get("same_buckets"):
        return "leads; the same buckets as the next"
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
    judged = "same" if proof.get("same_buckets") else proof["judged"]
    buys = step_said(best, " a step")
    if reference is not None and best["strategy"] != reference["strategy"]:  # the step against stock: the table's
        buys += "" if stock_next and judged in ("same", NOT_SIGNIFICANT) else _against_stock(best, reference)
    own = inverted(proof)  # the leader's step over the next's
    faster = f"{words} than" if (words := decide.faster_words(own["times"])) else f"{own['times']:.2f}× the step of"
    next_one = f"the next, {runner_name}"
    repeats = f" over {proof['repeats']} repeats" if proof.get("repeats") else ""
    if judged == "same":
        verb, verdict = "leads", f"{next_one}, makes the same buckets: one measurement"
    elif judged == SIGNIFICANT:
        verb, verdict = (
            "is fastest" + " to deploy" * bool(over),
            f"decided{repeats}" + ("" if stock_next else f": {faster} {next_one}"),
        )
    elif judged == NOT_SIGNIFICANT:
        verb, verdict = "leads", f"tied with {next_one}: {NO_CHANGE_SHOWN}"
    elif int(best["world_size"]) == 1:  # never judged: a need would read as a verdict the run works towards
        verb, verdict = "leads", ONE_RANK
    else:
        pair = "" if a_verdicts_pair(best, runner, reference, contenders) else "these two "  # evidence.too_few_text
        need = stats.needed_text(proof["needed"], proof["repeats"])  # a rough guide under 5 repeats, as the console's
        have = f"have {proof['repeats']}, {pair}{need}" if proof.get("needed") else ""
        whom = "" if stock_next else f" to tell it from {next_one}"
        verb, verdict = "leads", f"not decided: too few repeats{whom} ({have or '--repeats 2 or more'})"
    return f"{start} {verb}: {esc(buys)}; {esc(verdict)}; {parity}{esc(noisy)}."


ONE_RANK = "one rank is not judged: nothing communicates"


def _against_stock(best: pd.Series, reference: pd.Series) -> str:
    """', 1.77× faster than stock' (', so far …' where the repeats are too few to tell; the interval: the table's)."""
    proof = evidence(best, reference)
    name = reference_name(reference)
    if proof.get("same_buckets"):
        return f", the same buckets as {name}"
    faster = decide.faster_words(inverted(proof)["times"])
    if not faster or proof["judged"] == NOT_SIGNIFICANT:
        return f", {NO_CHANGE_SHOWN} against {name}"
    doubt = {TOO_FEW: "an estimated " if int(best["world_size"]) == 1 else "so far "}.get(proof["judged"], "")
    return f", {doubt}{faster} than {name}"  # one rank: never judged, no verdict so far


def answer_section(run: RunData, workloads: list[str]) -> str:
    frames = {workload: ranked(run.configs, workload=workload, confidence=run_confidence(run.meta)) for workload in
              workloads}  # fmt: skip
    levels = levels_note(list(frames.values()), run.meta.get("config") or {}, swept=not run.recommendations.empty)
    parts = ["<h2 id=answer>The answer</h2>", levels]
    stand_in = pooled = explained = False
    leaders: set[str] = set()  # the strategies a headline names first
    for workload, frame in frames.items():
        if frame.empty:
            continue
        size = run.configs.loc[run.configs["workload"] == workload, "size"].dropna()
        mine = run.configs[run.configs["workload"] == workload]
        optimizers = mine["optimizer"].dropna().unique() if "optimizer" in mine else []  # what the state costs
        setup = " · ".join(filter(None, [precision(mine), " or ".join(optimizers)]))  # each changes the answer
        parts.append(f"<h3>{name_html(workload, HEADING_NAME)}{esc('/' + str(size.iloc[0])) if len(size) else ''}"
                     f"{esc(' · ' + setup) if setup else ''}</h3>")  # fmt: skip
        # the largest world size first: the answer the run exists for (one rank communicates nothing)
        one = one_layout_pooled(frame[frame["world_size"] == 1])  # the caps' control: nothing to all-reduce
        control = caps_alone_spread(one[~one["is_floor"]]) if len(one) else None
        for _, group in sorted(frame.groupby("world_size"), key=lambda item: -item[0]):
            reference = reference_row(group)
            stand_in |= reference is not None and bool(roles.beyond_defaults(reference["impl"], reference["options"]))
            pooled |= any_pooled(one_layout_pooled(group))
            world, verdicts = int(group["world_size"].iloc[0]), run.recommendations  # the caps' verdicts, then all
            caps, said = alerts.cap_verdicts(verdicts, workload=workload, world=world, explain=not explained)
            explained |= said  # the buckets' why, once a page
            contenders = deployable(one_layout_pooled(group).loc[lambda rows: ~rows["is_floor"]])
            lead = optimizer_lead(contenders, reference, run)
            parts += [f"<p class=headline>{headline(group, control)}{lead}</p>", caps,
                      world_table(group, verdicts, workload=workload)]  # fmt: skip
            leaders.update(contenders["impl"].head(1))
            parts.append(floor.answer_below_floor(one_layout_pooled(group)) + hidden.late_note(group))  # as ranked
    if len(parts) == 2:
        parts.append("<p>No configuration of this run was measured: nothing to rank.</p>")
    parts.append(strategies_legend(list(dict.fromkeys(run.configs.loc[run.configs["status"] == "ok", "impl"])),
                                   leaders))  # fmt: skip
    parts.append(predict_links(run.meta))
    parts.append(f"<p class=caption>{CAPTION}{POOLED_CAPS * pooled}{STAND_IN if stand_in else ''}</p>")
    return "\n".join(parts)
